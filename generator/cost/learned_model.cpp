#include "generator/cost/learned_model.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>

#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "generator/gemm/gemm_features.hpp"
#include "generator/gemm/gemm_json.hpp"

namespace tessera {

// Problem features whose training range bounds where the model is trusted (they do not depend on the config).
// The model answers inside the box of its training problems, layouts included: a layout it never saw is one it
// cannot rank (its trees never split on it).
// A problem outside the span of the training problems in any of these is not the model's to rank (bf16: the f32
// records ranked 8×16 tiles for bf16 512³ at 161 GFLOP/s, against default_for's 6×64 at 213).
const std::array<const char*, 11> LearnedCpuModel::kRangeFeatures{
    "log_m",       "log_n",       "log_k",  "log_flops", "b_over_l2", "a_over_l2",
    "a_row_major", "b_row_major", "a_cold", "b_cold",    "bf16"};

std::size_t LearnedCpuModel::feature_index(const char* name) {
  const auto& names = cpu_feature_names();
  return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

std::string measured_problem_key(const GemmProblem& p) {
  const GemmSignature& g = p.signature;
  return fmt::format("{}{}{}{}|{}x{}x{}x{}|{}{}{}", dtype_name(g.a.dtype), g.a.layout.name(), dtype_name(g.b.dtype),
                     g.b.layout.name(), p.m, p.n, p.k, p.batch, p.a_cold ? "a_cold" : "", p.b_cold ? "b_cold" : "",
                     p.threads > 1 ? fmt::format("|t{}", p.threads) : "");
}

LearnedCpuModel::~LearnedCpuModel() = default;

void LearnedCpuModel::read_forests(const nlohmann::json& document) {
  const std::size_t columns = columns_.empty() ? cpu_feature_names().size() : columns_.size();
  ranker_weight_ = document.at("ranker_weight").get<double>();
  slowdown_scale_ = document.value("slowdown_scale", 0.0);
  ranker_scale_ = document.value("ranker_scale", 0.0);
  ranker_ = TreeEnsemble::from_json(document.at("ranker"), columns, "model ranker");
  slowdown_ = TreeEnsemble::from_json(document.at("slowdown"), columns, "model slowdown");
}

std::string LearnedCpuModel::to_json() const { return document_; }

std::shared_ptr<const LearnedCpuModel> LearnedCpuModel::from_json(const std::string& text, const std::string& name) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
    if (j.at("format") != "tessera-cost-model") throw InvalidArgument("model", "not a tessera cost model");
    if (j.at("version") != kVersion) throw InvalidArgument("model", fmt::format("version must be {}", kVersion));
    auto model = std::shared_ptr<LearnedCpuModel>(new LearnedCpuModel());
    // A model reads the features it was trained on, by name: one trained before a feature was added keeps working.
    const auto features = j.at("features").get<std::vector<std::string>>();
    if (features != cpu_feature_names()) {
      const auto& known = cpu_feature_names();
      for (const std::string& feature : features) {
        const auto at = std::find(known.begin(), known.end(), feature);
        if (at == known.end())
          throw InvalidArgument("model",
                                "trained on a feature this tessera does not compute (" + feature + "); retrain it");
        model->columns_.push_back(static_cast<std::size_t>(at - known.begin()));
      }
    }
    model->ranks_threads_ = std::find(features.begin(), features.end(), "log_split_share") != features.end();
    model->target_ = j.at("target").get<std::string>();
    model->name_ = name;
    // Optional: models written before it was recorded cover any FMA rate of their ISA.
    // Read as JSON first: a number beyond int's range must not be converted (undefined; found by fuzz_cost_model).
    const nlohmann::json rate = j.value("vector_fmas_per_cycle", nlohmann::json(0));
    if (!rate.is_number_integer() || rate.get<std::int64_t>() < 0 || rate.get<std::int64_t>() > 2)
      throw InvalidArgument("model", "vector_fmas_per_cycle must be 1 or 2");
    model->vector_fmas_per_cycle_ = rate.get<int>();
    model->range_min_ = j.at("range_min").get<std::vector<double>>();
    model->range_max_ = j.at("range_max").get<std::vector<double>>();
    if (model->range_min_.size() != kRangeFeatures.size() || model->range_max_.size() != kRangeFeatures.size())
      throw InvalidArgument("model", "range_min/range_max do not match this tessera's range features; retrain it");
    model->read_forests(j);
    // Optional: models trained before 2026-11-26 have no table.
    for (const auto& entry : j.value("measured_best", nlohmann::json::array()))
      model->measured_best_[entry.at("problem").get<std::string>()] =
          tessera::from_json<CpuGemmConfig>(entry.at("config"));
    model->document_ = text;
    return model;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("model", std::string("malformed: ") + e.what());
  }
}

bool LearnedCpuModel::covers(const GemmProblem& problem, const CpuTarget& target) const {
  if (target.str() != target_) return false;  // trained on another ISA's kernels and caches
  // f32 and bf16 records only (bf16 as a range feature): an int8 kernel's timing is none of theirs.
  if (is_int8(problem.signature)) return false;
  if (amx_pays(problem, target)) return false;  // no records of AMX kernels yet: the rules choose
  if (vector_fmas_per_cycle_ != 0 && target.vector_fmas_per_cycle != vector_fmas_per_cycle_) return false;
  // The problem as asked (a default that transposes it would describe the transposed operands' layouts).
  // Range features are the problem's own: no variant space to compare with.
  const std::vector<CpuGemmConfig> config{CpuGemmConfig::default_for(problem, target).untransposed()};
  const auto f = cpu_feature_rows(problem, config, target, &config);
  for (std::size_t i = 0; i < kRangeFeatures.size(); ++i) {
    const double x = f[feature_index(kRangeFeatures[i])];
    if (x < range_min_[i] || x > range_max_[i]) return false;
  }
  return true;
}

std::size_t fewest_loads_among_ties(const std::vector<CpuGemmConfig>& configs, const std::vector<double>& log2_slowdown,
                                    int lanes) {
  constexpr double kTie = 0.0427;  // log2(1.03)
  const auto lowest =
      static_cast<std::size_t>(std::min_element(log2_slowdown.begin(), log2_slowdown.end()) - log2_slowdown.begin());
  const auto takes_part = [](const CpuGemmConfig& c) { return !c.dot && !c.fixed() && c.mr >= 4; };
  if (!takes_part(configs[lowest])) return lowest;
  const auto tied = [&](std::size_t i) {
    return takes_part(configs[i]) && log2_slowdown[i] <= log2_slowdown[lowest] + kTie;
  };
  double fewest = configs[lowest].loads_per_fma(lanes);
  for (std::size_t i = 0; i < configs.size(); ++i)
    if (tied(i)) fewest = std::min(fewest, configs[i].loads_per_fma(lanes));
  if (fewest > configs[lowest].loads_per_fma(lanes) - 0.05) return lowest;
  std::size_t pick = lowest;  // the fastest of the ties that issue the fewest loads
  for (std::size_t i = 0; i < configs.size(); ++i)
    if (tied(i) && configs[i].loads_per_fma(lanes) <= fewest + 1e-9 &&
        (pick == lowest || log2_slowdown[i] < log2_slowdown[pick]))
      pick = i;
  return pick;
}

std::vector<double> LearnedCpuModel::score(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs,
                                           const CpuTarget& target) const {
  if (configs.empty()) return {};
  std::vector<float> rows = cpu_feature_rows(problem, configs, target);
  if (!columns_.empty()) {  // the model's own features, in its order
    const std::size_t all = cpu_feature_names().size();
    std::vector<float> own;
    own.reserve(configs.size() * columns_.size());
    for (std::size_t i = 0; i < configs.size(); ++i)
      for (const std::size_t c : columns_) own.push_back(rows[i * all + c]);
    rows = std::move(own);
  }
  // Each model's scores standardised over the candidates (the ranker's are on no scale of their own), the ranker's
  // negated (higher is better there), then weighed together.
  const auto standardised = [&](std::vector<double> v, double sign) {
    double mean = 0, square = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    for (double x : v) square += (x - mean) * (x - mean);
    const double sd = std::sqrt(square / static_cast<double>(v.size())) + 1e-9;
    for (double& x : v) x = sign * (x - mean) / sd;
    return v;
  };
  const auto scaled = [&](std::vector<double> v, double sign, double scale) {
    if (scale <= 0) return standardised(std::move(v), sign);
    for (double& x : v) x = sign * x / scale;
    return v;
  };
  const std::vector<double> slowdown = scaled(slowdown_.predict(rows.data(), configs.size()), 1.0, slowdown_scale_);
  const std::vector<double> ranker = scaled(ranker_.predict(rows.data(), configs.size()), -1.0, ranker_scale_);
  std::vector<double> scores(configs.size());
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = slowdown[i] + ranker_weight_ * ranker[i];
  if (const auto best = measured_best_.find(measured_problem_key(problem)); best != measured_best_.end()) {
    const double first = *std::min_element(scores.begin(), scores.end()) - 1.0;
    for (std::size_t i = 0; i < scores.size(); ++i)
      if (configs[i] == best->second) scores[i] = first;
  }
  return scores;
}

}  // namespace tessera
