// The learned CPU cost model: gradient-boosted trees (XGBoost C API) on cpu_features — a pairwise ranker trained
// within each problem, which picks the variants, and a regression on log time, which predicts how long they take.
// Stored as one JSON document holding both boosters, the feature names and the target it was trained for.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "generator/cost_model.hpp"

namespace tessera {

// Rows of features grouped by problem (consecutive rows with the same problem), with their measured times.
struct TrainingSet {
  std::vector<float> features;        // rows × cpu_feature_names().size(), row-major
  std::vector<float> log_time;        // per row: log2 of the median time
  std::vector<unsigned> group_sizes;  // rows per problem, in order
  std::size_t rows() const { return log_time.size(); }
};

struct TrainingOptions {
  // Measured on bench/records (5-fold random split, mean top-1 regret): depth 6, 300 rounds, eta 0.1: 3.9%;
  // depth 8, 600 rounds, eta 0.05: 2.7-3.1% (a 17 MB ranker); depth 7, 400 rounds, eta 0.07: see README.
  int rounds = 400;
  int max_depth = 7;
  double learning_rate = 0.07;
  std::uint64_t seed = 1;
  std::string objective = "rank:pairwise";  // or rank:ndcg (graded relevance)
  int threads = 2;
};

class LearnedCpuModel : public CpuCostModel {
 public:
  ~LearnedCpuModel() override;
  // Parses a model document; throws InvalidArgument when it is not one (or was made for other features).
  static std::shared_ptr<const LearnedCpuModel> from_json(const std::string& text);
  static std::shared_ptr<const LearnedCpuModel> train(const TrainingSet& set, const std::string& target,
                                                      const TrainingOptions& options = {});
  std::string to_json() const;

  std::string name() const override { return "learned"; }
  // Lower is better: the ranker's score, negated.
  std::vector<double> score(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs,
                            const Target& target) const override;
  // Predicted log2 of the time in nanoseconds.
  std::vector<double> predict_log_time(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs,
                                       const Target& target) const;
  const std::string& target() const { return target_; }
  // Problems inside the range it was trained on: M, N, K, flops and the A and B footprints each within the training
  // set's extremes. Outside, learned models are known to lose to simpler ones (Kaufman et al., MLSys 2021), and here
  // they did (1024³: 246 GFLOP/s for the model's pick against 268 for default_for's; 1×4096×4096 with a 64 MB B:
  // 9.0 against 16.9), so callers fall back.
  bool covers(const GemmProblem& problem, const Target& target) const override;

 private:
  LearnedCpuModel() = default;
  std::vector<double> predict(void* booster, const std::vector<float>& rows) const;
  void* ranker_ = nullptr;
  void* regressor_ = nullptr;
  std::string target_;
  std::vector<double> range_min_, range_max_;  // of the features in kRangeFeatures, over the training set
};

}  // namespace tessera
