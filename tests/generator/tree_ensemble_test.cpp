// TreeEnsemble against XGBoost's own predictor on the same trees, and its refusal of malformed models.
#include <gtest/gtest.h>
#include <xgboost/c_api.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "generator/core/error.hpp"
#include "generator/cost/base64.hpp"
#include "generator/cost/tree_ensemble.hpp"

namespace tessera {
namespace {

constexpr std::size_t kRows = 300, kColumns = 7;

// A forest trained by XGBoost on a rule with interactions, its JSON, and XGBoost's predictions for `rows`.
struct Trained {
  nlohmann::json model;
  std::vector<float> predictions;
};

Trained train_xgboost(const char* objective, const std::vector<float>& rows) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> x(kRows * kColumns), y(kRows);
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t c = 0; c < kColumns; ++c) x[r * kColumns + c] = u(rng);
    const float* f = &x[r * kColumns];
    y[r] = std::floor(f[0] > 0 ? f[1] * f[2] + 2 : std::sin(f[3]) - f[6]);
  }
  // Some missing values, so that the trees learn where they go.
  for (std::size_t r = 0; r < kRows; r += 7) x[r * kColumns + 1] = NAN;
  Trained t;
  DMatrixHandle data = nullptr;
  BoosterHandle booster = nullptr;
  EXPECT_EQ(XGDMatrixCreateFromMat(x.data(), kRows, kColumns, NAN, &data), 0);
  EXPECT_EQ(XGDMatrixSetFloatInfo(data, "label", y.data(), kRows), 0);
  if (std::string(objective).rfind("rank:", 0) == 0) {
    const std::vector<unsigned> groups(kRows / 30, 30);
    EXPECT_EQ(XGDMatrixSetUIntInfo(data, "group", groups.data(), groups.size()), 0);
  }
  EXPECT_EQ(XGBoosterCreate(&data, 1, &booster), 0);
  for (const auto& [key, value] : {std::pair{"objective", objective},
                                   {"max_depth", "6"},
                                   {"tree_method", "hist"},
                                   {"nthread", "1"},
                                   {"eta", "0.3"}})
    EXPECT_EQ(XGBoosterSetParam(booster, key, value), 0);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(XGBoosterUpdateOneIter(booster, i, data), 0);
  bst_ulong length = 0;
  const char* text = nullptr;
  EXPECT_EQ(XGBoosterSaveModelToBuffer(booster, R"({"format": "json"})", &length, &text), 0);
  t.model = nlohmann::json::parse(std::string(text, length));
  DMatrixHandle test = nullptr;
  EXPECT_EQ(XGDMatrixCreateFromMat(rows.data(), rows.size() / kColumns, kColumns, NAN, &test), 0);
  const float* out = nullptr;
  EXPECT_EQ(XGBoosterPredict(booster, test, 0, 0, 0, &length, &out), 0);
  t.predictions.assign(out, out + length);
  XGDMatrixFree(test);
  XGDMatrixFree(data);
  XGBoosterFree(booster);
  return t;
}

std::vector<float> test_rows() {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-3, 3);
  std::vector<float> rows(200 * kColumns);
  for (float& v : rows) v = u(rng);
  for (std::size_t r = 0; r < 200; r += 5) rows[r * kColumns + (r / 5) % kColumns] = NAN;
  return rows;
}

TEST(TreeEnsemble, PredictsWhatXGBoostPredicts) {
  const std::vector<float> rows = test_rows();
  for (const char* objective : {"reg:squarederror", "rank:pairwise"}) {
    const Trained t = train_xgboost(objective, rows);
    const TreeEnsemble forest = TreeEnsemble::from_xgboost_json(t.model, kColumns, "model");
    EXPECT_EQ(forest.trees(), 40u);
    const std::vector<double> ours = forest.predict(rows.data(), rows.size() / kColumns);
    ASSERT_EQ(ours.size(), t.predictions.size());
    double spread = 0;
    for (std::size_t i = 0; i < ours.size(); ++i) {
      EXPECT_NEAR(ours[i], t.predictions[i], 1e-4 * (1 + std::abs(t.predictions[i]))) << objective << " row " << i;
      spread = std::max(spread, std::abs(ours[i] - ours[0]));
    }
    EXPECT_GT(spread, 0.5) << "the forest must tell rows apart for the comparison to mean anything";
    // Its compact form (what a cost model file keeps) reads back as the same forest.
    const TreeEnsemble back =
        TreeEnsemble::from_json(nlohmann::json::parse(forest.to_json().dump()), kColumns, "model");
    EXPECT_EQ(back.trees(), forest.trees());
    EXPECT_EQ(back.predict(rows.data(), rows.size() / kColumns), ours) << objective;
  }
}

TEST(TreeEnsemble, RefusesMalformedModels) {
  const Trained t = train_xgboost("reg:squarederror", test_rows());
  const auto refused = [&](auto edit, const char* why) {
    nlohmann::json m = t.model;
    edit(m["learner"]["gradient_booster"]["model"]["trees"][0]);
    EXPECT_THROW(TreeEnsemble::from_xgboost_json(m, kColumns, "model"), InvalidArgument) << why;
  };
  refused([](auto& tree) { tree["left_children"][0] = 0; }, "a child that points back at its parent");
  refused([](auto& tree) { tree["right_children"][0] = 1 << 20; }, "a child past the tree");
  refused([](auto& tree) { tree["split_indices"][0] = kColumns; }, "a feature the rows do not have");
  refused([](auto& tree) { tree["split_conditions"].erase(0); }, "arrays of different lengths");
  refused([](auto& tree) { tree["left_children"] = "three"; }, "not an array");
  refused([](auto& tree) { tree["left_children"][0] = 9.3e18; }, "a float where a node index belongs");
  refused([](auto& tree) { tree["split_indices"][0] = 18446744073709551615u; }, "an index beyond int64");
  refused([](auto& tree) { tree["default_left"][0] = 1e300; }, "a double beyond int");
  refused([](auto& tree) { tree["split_conditions"][0] = 1e300; }, "a threshold beyond float");
  EXPECT_THROW(TreeEnsemble::from_xgboost_json(nlohmann::json::object(), kColumns, "model"), InvalidArgument);
  nlohmann::json no_trees = t.model;
  no_trees["learner"]["gradient_booster"]["model"]["trees"] = nlohmann::json::array();
  EXPECT_THROW(TreeEnsemble::from_xgboost_json(no_trees, kColumns, "model"), InvalidArgument);
  nlohmann::json compact = TreeEnsemble::from_xgboost_json(t.model, kColumns, "model").to_json();
  // The compact form: a split on a feature the rows do not have, arrays that are not base64 or hold too few nodes.
  const auto compact_refused = [&](auto edit, const char* why) {
    nlohmann::json m = compact;
    edit(m);
    EXPECT_THROW(TreeEnsemble::from_json(m, kColumns, "model"), InvalidArgument) << why;
  };
  compact_refused(
      [](nlohmann::json& m) {
        auto features = *base64_decode(m["feature"].get<std::string>());
        features[0] = 99;  // the root of the first tree, little-endian int32
        m["feature"] = base64_encode(features.data(), features.size());
      },
      "a feature the rows do not have");
  compact_refused([](nlohmann::json& m) { m["value"] = "not base64!"; }, "not base64");
  compact_refused([](nlohmann::json& m) { m["nodes_per_tree"][0] = m["nodes_per_tree"][0].get<int>() + 1; },
                  "more nodes than the arrays hold");
  compact_refused([](nlohmann::json& m) { m["nodes_per_tree"][0] = 0; }, "an empty tree");
  // Found by fuzz_cost_model: nlohmann's own conversion of 9.2e18 (a float) to int64 is undefined.
  compact_refused([](nlohmann::json& m) { m["nodes_per_tree"][0] = 9.223372036854775808e18; }, "a float node count");
  compact_refused([](nlohmann::json& m) { m["nodes_per_tree"][0] = 9223372036854775808u; }, "beyond int64");
  compact_refused([](nlohmann::json& m) { m["left"] = 3; }, "not a string");
  compact_refused([](nlohmann::json& m) { m["encoding"] = "decimal"; }, "another encoding");
  compact["format"] = "something else";
  EXPECT_THROW(TreeEnsemble::from_json(compact, kColumns, "model"), InvalidArgument);
  // The model's own feature count is what it splits on; fewer columns than that cannot be read.
  EXPECT_THROW(TreeEnsemble::from_xgboost_json(t.model, 2, "model"), InvalidArgument);
}

// RFC 4648's test vectors, and strings that are not padded base64.
TEST(Base64, RoundTripsTheRfcVectorsAndRefusesTheRest) {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(plain.data(), plain.size()), encoded);
    const auto back = base64_decode(encoded);
    ASSERT_TRUE(back.has_value()) << encoded;
    EXPECT_EQ(std::string(back->begin(), back->end()), plain);
  }
  for (const char* bad : {"Zg=", "Zg===", "Z===", "Zm9v!A==", "Zg==Zm9v", "=Zm9", "Zm=v"})
    EXPECT_FALSE(base64_decode(bad).has_value()) << bad;
}

}  // namespace
}  // namespace tessera
