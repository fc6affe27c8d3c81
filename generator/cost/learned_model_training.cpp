// LearnedCpuModel::train: the forests fitted with XGBoost. Apart from the model's reading and scoring so that an
// application that only runs kernels does not link XGBoost (it is in the tessera_tuning library).
#include <xgboost/c_api.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "generator/cost/learned_model.hpp"
#include "generator/gemm/gemm_features.hpp"

namespace tessera {

namespace {
std::mutex g_xgboost_mutex;  // one training at a time: XGBoost's global state is not ours to share

// The ranker's relevance of a variant `slower` (log time) behind the best of its problem, in grades of 0.05 (~5%).
// Pairwise: every grade, so variants within one grade of each other form no pair — at a measurement spread of 1-2%
// such pairs are mostly noise (5-fold random split, mean top-1 regret on the 2026-11-23 records: continuous labels
// 4.2%, grades of 2.5% 3.9%, of 5% 3.7%, of 10% 4.1%). NDCG: 10 within the first grade, 0 from 50% slower, so it
// rewards getting the top right (regret 3.5% but Kendall τ 0.71: nothing orders the tail, even with more grades).
float relevance_grade(float slower, bool ndcg) {
  const float grade = std::floor(slower * 20.0f);
  return ndcg ? std::max(0.0f, 10.0f - grade) : -grade;
}

void check(int status, const char* call) {
  if (status != 0) throw Error(fmt::format("xgboost: {} failed: {}", call, XGBGetLastError()));
}

struct Matrix {
  DMatrixHandle handle = nullptr;
  Matrix(const std::vector<float>& rows, std::size_t columns) {
    check(XGDMatrixCreateFromMat(rows.data(), rows.size() / columns, columns, NAN, &handle), "XGDMatrixCreateFromMat");
  }
  ~Matrix() { XGDMatrixFree(handle); }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
};

std::string save(BoosterHandle booster) {
  bst_ulong length = 0;
  const char* buffer = nullptr;
  check(XGBoosterSaveModelToBuffer(booster, R"({"format": "json"})", &length, &buffer), "XGBoosterSaveModelToBuffer");
  return std::string(buffer, length);
}

// Owns a booster for the length of a training run.
struct Booster {
  BoosterHandle handle = nullptr;
  explicit Booster(const Matrix& train) { check(XGBoosterCreate(&train.handle, 1, &handle), "XGBoosterCreate"); }
  ~Booster() { XGBoosterFree(handle); }
  Booster(const Booster&) = delete;
  Booster& operator=(const Booster&) = delete;
};
}  // namespace

namespace {
void validate(const TrainingOptions& o) {
  const auto at_least_one = [](int v, const char* name) {
    if (v < 1) throw InvalidArgument(name, fmt::format("must be at least 1, not {}", v));
  };
  at_least_one(o.rounds, "--rounds");
  at_least_one(o.slowdown_rounds, "--slowdown-rounds");
  at_least_one(o.parallel_trees, "--parallel-trees");
  if (o.parallel_trees > 16) throw InvalidArgument("--parallel-trees", "must be at most 16");
  if (o.max_depth < 1 || o.max_depth > 20) throw InvalidArgument("--depth", "must be between 1 and 20");
  if (o.slowdown_depth < 1 || o.slowdown_depth > 20)
    throw InvalidArgument("--slowdown-depth", "must be between 1 and 20");
  if (!(o.learning_rate > 0 && o.learning_rate <= 1)) throw InvalidArgument("--eta", "must be in (0, 1]");
  if (!(o.near_best_weight >= 0 && std::isfinite(o.near_best_weight)))
    throw InvalidArgument("--near-best-weight", "must be a finite number ≥ 0");
  if (!(o.ranker_weight >= 0 && std::isfinite(o.ranker_weight)))
    throw InvalidArgument("--ranker-weight", "must be a finite number ≥ 0");
}
}  // namespace

namespace {
double spread(const std::vector<double>& v) {  // standard deviation
  double mean = 0, square = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) square += (x - mean) * (x - mean);
  return std::sqrt(square / static_cast<double>(v.size()));
}
}  // namespace

std::shared_ptr<const LearnedCpuModel> LearnedCpuModel::train(const TrainingSet& set, const CpuTarget& target,
                                                              const TrainingOptions& options) {
  validate(options);
  const std::size_t columns = cpu_feature_names().size();
  if (set.rows() == 0 || set.features.size() != set.rows() * columns)
    throw InvalidArgument("training set", "features and times do not match");
  std::lock_guard lock(g_xgboost_mutex);
  auto model = std::shared_ptr<LearnedCpuModel>(new LearnedCpuModel());
  model->range_min_.assign(kRangeFeatures.size(), INFINITY);
  model->range_max_.assign(kRangeFeatures.size(), -INFINITY);
  for (std::size_t row = 0; row < set.rows(); ++row)
    for (std::size_t i = 0; i < kRangeFeatures.size(); ++i) {
      const double x = set.features[row * columns + feature_index(kRangeFeatures[i])];
      model->range_min_[i] = std::min(model->range_min_[i], x);
      model->range_max_[i] = std::max(model->range_max_[i], x);
    }
  const Matrix data(set.features, columns);
  const auto common = [&](BoosterHandle b, int depth) {
    check(XGBoosterSetParam(b, "max_depth", std::to_string(depth).c_str()), "XGBoosterSetParam");
    check(XGBoosterSetParam(b, "eta", fmt::format("{}", options.learning_rate).c_str()), "XGBoosterSetParam");
    check(XGBoosterSetParam(b, "seed", std::to_string(options.seed).c_str()), "XGBoosterSetParam");
    check(XGBoosterSetParam(b, "subsample", "0.9"), "XGBoosterSetParam");
    check(XGBoosterSetParam(b, "colsample_bytree", "0.9"), "XGBoosterSetParam");
    check(XGBoosterSetParam(b, "nthread", std::to_string(options.threads).c_str()), "XGBoosterSetParam");
    // Histogram splits: 6× faster to train than exact ones on the 74k records, and as good (3.3% vs 3.5%).
    check(XGBoosterSetParam(b, "tree_method", "hist"), "XGBoosterSetParam");
    check(XGBoosterSetParam(b, "num_parallel_tree", std::to_string(options.parallel_trees).c_str()),
          "XGBoosterSetParam");
  };
  // Each variant's slowdown behind the best of its problem (log2), and the ranker's grade of it.
  std::vector<float> slower(set.rows()), relevance(set.rows()), weight(set.rows());
  for (std::size_t row = 0, g = 0; g < set.group_sizes.size(); row += set.group_sizes[g++]) {
    float best = INFINITY;
    for (std::size_t i = row; i < row + set.group_sizes[g]; ++i) best = std::min(best, set.log_time[i]);
    for (std::size_t i = row; i < row + set.group_sizes[g]; ++i) {
      slower[i] = set.log_time[i] - best;
      relevance[i] = relevance_grade(slower[i], options.objective == "rank:ndcg");
      weight[i] = static_cast<float>(1.0 / (1.0 + options.near_best_weight * slower[i]));
      slower[i] = std::min(slower[i], 2.0f);
    }
  }
  check(XGDMatrixSetFloatInfo(data.handle, "label", relevance.data(), relevance.size()), "XGDMatrixSetFloatInfo");
  check(XGDMatrixSetUIntInfo(data.handle, "group", set.group_sizes.data(), set.group_sizes.size()),
        "XGDMatrixSetUIntInfo");
  const Booster ranker(data);
  common(ranker.handle, options.max_depth);
  check(XGBoosterSetParam(ranker.handle, "objective", options.objective.c_str()), "XGBoosterSetParam");
  for (int i = 0; i < options.rounds; ++i)
    check(XGBoosterUpdateOneIter(ranker.handle, i, data.handle), "XGBoosterUpdateOneIter");

  const Matrix slowdowns(set.features, columns);
  check(XGDMatrixSetFloatInfo(slowdowns.handle, "label", slower.data(), slower.size()), "XGDMatrixSetFloatInfo");
  check(XGDMatrixSetFloatInfo(slowdowns.handle, "weight", weight.data(), weight.size()), "XGDMatrixSetFloatInfo");
  const Booster slowdown(slowdowns);
  common(slowdown.handle, options.slowdown_depth);
  check(XGBoosterSetParam(slowdown.handle, "objective", "reg:squarederror"), "XGBoosterSetParam");
  for (int i = 0; i < options.slowdown_rounds; ++i)
    check(XGBoosterUpdateOneIter(slowdown.handle, i, slowdowns.handle), "XGBoosterUpdateOneIter");

  // The boosters' trees in tessera's compact form; the model is what reading its own document gives, so a trained
  // model and the same model loaded from its file score alike.
  const std::size_t features = cpu_feature_names().size();
  const auto forest = [&](BoosterHandle booster, const char* what) {
    return TreeEnsemble::from_xgboost_json(nlohmann::json::parse(save(booster)), features, what).to_json();
  };
  nlohmann::json measured = nlohmann::json::array();
  for (const auto& [key, config] : set.measured_best)
    measured.push_back({{"problem", key}, {"config", tessera::to_json(config)}});
  const nlohmann::json document{{"format", "tessera-cost-model"},
                                {"version", kVersion},
                                {"target", target.str()},
                                {"vector_fmas_per_cycle", target.vector_fmas_per_cycle},
                                {"range_min", model->range_min_},
                                {"range_max", model->range_max_},
                                {"features", cpu_feature_names()},
                                {"ranker_weight", options.ranker_weight},
                                {"ranker", forest(ranker.handle, "ranker")},
                                {"slowdown", forest(slowdown.handle, "slowdown")},
                                {"measured_best", measured}};
  // The forests' scales: the median over the training problems of each forest's spread of predictions within one
  // problem. Scores divided by them mean the same whatever else is ranked in the same call.
  nlohmann::json scaled = document;
  const auto trained = from_json(document.dump());
  std::vector<double> slowdown_sd, ranker_sd;
  for (std::size_t row = 0, g = 0; g < set.group_sizes.size(); row += set.group_sizes[g++]) {
    const std::size_t n = set.group_sizes[g];
    if (n < 2) continue;
    const float* x = set.features.data() + row * columns;
    slowdown_sd.push_back(spread(trained->slowdown_.predict(x, n)));
    ranker_sd.push_back(spread(trained->ranker_.predict(x, n)));
  }
  scaled["slowdown_scale"] = std::max(median(slowdown_sd), 1e-6);
  scaled["ranker_scale"] = std::max(median(ranker_sd), 1e-6);
  return from_json(scaled.dump());
}

}  // namespace tessera
