#include "generator/learned_model.hpp"

#include <xgboost/c_api.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>

#include "generator/error.hpp"
#include "generator/gemm_features.hpp"

namespace tessera {

namespace {
constexpr int kModelVersion = 1;
std::mutex g_xgboost_mutex;  // boosters are not safe for concurrent prediction in XGBoost 1.6

// Problem features whose training range bounds where the model is trusted (they do not depend on the config).
// The model answers inside the box of its training problems, layouts included: a layout it never saw is one it
// cannot rank (its trees never split on it).
// A problem outside the span of the training problems in any of these is not the model's to rank (bf16: the f32
// records ranked 8×16 tiles for bf16 512³ at 161 GFLOP/s, against default_for's 6×64 at 213).
const std::array<const char*, 11> kRangeFeatures{"log_m",       "log_n",       "log_k",  "log_flops", "b_over_l2",
                                                 "a_over_l2",   "a_row_major", "b_row_major", "a_cold", "b_cold",
                                                 "bf16"};

std::size_t feature_index(const char* name) {
  const auto& names = cpu_feature_names();
  return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

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

BoosterHandle make_booster(const Matrix* train) {
  BoosterHandle booster = nullptr;
  DMatrixHandle mats[1] = {train ? train->handle : nullptr};
  check(XGBoosterCreate(mats, train ? 1 : 0, &booster), "XGBoosterCreate");
  check(XGBoosterSetParam(booster, "nthread", "1"), "XGBoosterSetParam");
  return booster;
}

std::string save(BoosterHandle booster) {
  bst_ulong length = 0;
  const char* buffer = nullptr;
  check(XGBoosterSaveModelToBuffer(booster, R"({"format": "json"})", &length, &buffer), "XGBoosterSaveModelToBuffer");
  return std::string(buffer, length);
}

BoosterHandle load(const std::string& text) {
  BoosterHandle booster = make_booster(nullptr);
  if (XGBoosterLoadModelFromBuffer(booster, text.data(), text.size()) != 0) {
    XGBoosterFree(booster);
    throw InvalidArgument("model", std::string("not an XGBoost model: ") + XGBGetLastError());
  }
  check(XGBoosterSetParam(booster, "nthread", "1"), "XGBoosterSetParam");
  return booster;
}
}  // namespace

LearnedCpuModel::~LearnedCpuModel() {
  if (ranker_) XGBoosterFree(ranker_);
  if (regressor_) XGBoosterFree(regressor_);
}

std::shared_ptr<const LearnedCpuModel> LearnedCpuModel::train(const TrainingSet& set, const std::string& target,
                                                              const TrainingOptions& options) {
  const std::size_t columns = cpu_feature_names().size();
  if (set.rows() == 0 || set.features.size() != set.rows() * columns)
    throw InvalidArgument("training set", "features and times do not match");
  std::lock_guard lock(g_xgboost_mutex);
  auto model = std::shared_ptr<LearnedCpuModel>(new LearnedCpuModel());
  model->target_ = target;
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
  };
  std::vector<float> relevance(set.rows());
  for (std::size_t row = 0, g = 0; g < set.group_sizes.size(); row += set.group_sizes[g++]) {
    float best = INFINITY;
    for (std::size_t i = row; i < row + set.group_sizes[g]; ++i) best = std::min(best, set.log_time[i]);
    for (std::size_t i = row; i < row + set.group_sizes[g]; ++i)
      relevance[i] = relevance_grade(set.log_time[i] - best, options.objective == "rank:ndcg");
  }
  check(XGDMatrixSetFloatInfo(data.handle, "label", relevance.data(), relevance.size()), "XGDMatrixSetFloatInfo");
  check(XGDMatrixSetUIntInfo(data.handle, "group", set.group_sizes.data(), set.group_sizes.size()),
        "XGDMatrixSetUIntInfo");
  model->ranker_ = make_booster(&data);
  common(model->ranker_, options.max_depth);
  check(XGBoosterSetParam(model->ranker_, "objective", options.objective.c_str()), "XGBoosterSetParam");
  for (int i = 0; i < options.rounds; ++i)
    check(XGBoosterUpdateOneIter(model->ranker_, i, data.handle), "XGBoosterUpdateOneIter");

  const Matrix times(set.features, columns);
  check(XGDMatrixSetFloatInfo(times.handle, "label", set.log_time.data(), set.rows()), "XGDMatrixSetFloatInfo");
  // The time regression only has to be roughly right (it estimates, it does not choose): a smaller forest.
  model->regressor_ = make_booster(&times);
  common(model->regressor_, std::min(options.max_depth, 6));
  check(XGBoosterSetParam(model->regressor_, "objective", "reg:squarederror"), "XGBoosterSetParam");
  for (int i = 0; i < std::max(1, options.rounds / 3); ++i)
    check(XGBoosterUpdateOneIter(model->regressor_, i, times.handle), "XGBoosterUpdateOneIter");
  return model;
}

std::string LearnedCpuModel::to_json() const {
  std::lock_guard lock(g_xgboost_mutex);
  const nlohmann::json j{{"format", "tessera-cost-model"},
                         {"version", kModelVersion},
                         {"target", target_},
                         {"range_min", range_min_},
                         {"range_max", range_max_},
                         {"features", cpu_feature_names()},
                         {"ranker", nlohmann::json::parse(save(ranker_))},
                         {"regressor", nlohmann::json::parse(save(regressor_))}};
  return j.dump();
}

std::shared_ptr<const LearnedCpuModel> LearnedCpuModel::from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
    if (j.at("format") != "tessera-cost-model") throw InvalidArgument("model", "not a tessera cost model");
    if (j.at("version") != kModelVersion)
      throw InvalidArgument("model", fmt::format("version must be {}", kModelVersion));
    if (j.at("features").get<std::vector<std::string>>() != cpu_feature_names())
      throw InvalidArgument("model", "trained on other features than this tessera computes; retrain it");
    std::lock_guard lock(g_xgboost_mutex);
    auto model = std::shared_ptr<LearnedCpuModel>(new LearnedCpuModel());
    model->target_ = j.at("target").get<std::string>();
    model->range_min_ = j.at("range_min").get<std::vector<double>>();
    model->range_max_ = j.at("range_max").get<std::vector<double>>();
    if (model->range_min_.size() != kRangeFeatures.size() || model->range_max_.size() != kRangeFeatures.size())
      throw InvalidArgument("model", "range_min/range_max do not match this tessera's range features; retrain it");
    model->ranker_ = load(j.at("ranker").dump());
    model->regressor_ = load(j.at("regressor").dump());
    return model;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("model", std::string("malformed: ") + e.what());
  }
}

bool LearnedCpuModel::covers(const GemmProblem& problem, const Target& target) const {
  if (target.str() != target_) return false;  // trained on another ISA's kernels and caches
  // The problem as asked (a default that transposes it would describe the transposed operands' layouts).
  const auto f = cpu_features(problem, CpuGemmConfig::default_for(problem, target).untransposed(), target);
  for (std::size_t i = 0; i < kRangeFeatures.size(); ++i) {
    const double x = f[feature_index(kRangeFeatures[i])];
    if (x < range_min_[i] || x > range_max_[i]) return false;
  }
  return true;
}

std::vector<double> LearnedCpuModel::predict(void* booster, const std::vector<float>& rows) const {
  std::lock_guard lock(g_xgboost_mutex);
  const Matrix data(rows, cpu_feature_names().size());
  bst_ulong length = 0;
  const float* out = nullptr;
  check(XGBoosterPredict(booster, data.handle, 0, 0, 0, &length, &out), "XGBoosterPredict");
  return {out, out + length};
}

std::vector<double> LearnedCpuModel::score(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs,
                                           const Target& target) const {
  if (configs.empty()) return {};
  std::vector<float> rows;
  for (const auto& c : configs) {
    const auto f = cpu_features(problem, c, target);
    rows.insert(rows.end(), f.begin(), f.end());
  }
  std::vector<double> scores = predict(ranker_, rows);
  for (double& s : scores) s = -s;
  return scores;
}

std::vector<double> LearnedCpuModel::predict_log_time(const GemmProblem& problem,
                                                      const std::vector<CpuGemmConfig>& configs,
                                                      const Target& target) const {
  if (configs.empty()) return {};
  std::vector<float> rows;
  for (const auto& c : configs) {
    const auto f = cpu_features(problem, c, target);
    rows.insert(rows.end(), f.begin(), f.end());
  }
  return predict(regressor_, rows);
}

}  // namespace tessera
