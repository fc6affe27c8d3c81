// The learned CPU cost model: gradient-boosted trees (XGBoost C API) on cpu_features. Two models pick the variants,
// their scores scaled by each forest's spread over the training problems and summed: a regression on each variant's
// slowdown behind the best of its problem, weighted towards the near-best (it chooses the top), and a pairwise ranker
// within each problem (it orders the rest). Stored as one JSON document holding the boosters, the feature names and
// the target it was trained for.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generator/cost/cost_model.hpp"
#include "generator/cost/tree_ensemble.hpp"
#include "generator/gemm/gemm_json.hpp"

namespace tessera {

// What makes a measured problem the same as one asked for, to the model's table of measured bests: operand types and
// layouts, sizes and batch, whether A and B arrive cold, and the threads (more than one).
std::string measured_problem_key(const GemmProblem& problem);

// Among variants measured within 3% of the fastest (the records' median spread between twin variants: ties), the
// one issuing fewest loads per FMA (by more than 0.05; otherwise the fastest), for the table of measured bests.
// Such variants time alike on an idle core, but when another tenant shares the core's load ports the
// 24-accumulator tiles keep their speed and 8x32 does not (the Xeon VM, 1024³, 1 thread, medians of 6 alternated
// runs, GFLOP/s: 8x32 101, 12x32 102, 4x96 109, 6x64 119, 8x48 121). Applied to the forests' predicted ties
// instead, it cost the random split 2.18% -> 2.55% mean regret. Tiles of fewer than 4 rows (GEMV-like, streaming B),
// dot-product and fixed-size kernels take no part.
std::size_t fewest_loads_among_ties(const std::vector<CpuGemmConfig>& configs, const std::vector<double>& log2_slowdown,
                                    int lanes);

// Rows of features grouped by problem (consecutive rows with the same problem), with their measured times.
struct TrainingSet {
  std::vector<float> features;        // rows × cpu_feature_names().size(), row-major
  std::vector<float> log_time;        // per row: log2 of the median time
  std::vector<unsigned> group_sizes;  // rows per problem, in order
  // Per problem (optional): its measured_problem_key and its fastest measured config.
  std::vector<std::pair<std::string, CpuGemmConfig>> measured_best;
  std::size_t rows() const { return log_time.size(); }
};

struct TrainingOptions {
  // The ranker's forest: each round averages `parallel_trees` trees, each on its own subsample (bagging), which
  // ranked held-out shape families better than one deeper tree a round for the same number of trees to walk. The
  // measurements behind these values are in bench/results/history.md.
  int rounds = 125;
  int max_depth = 8;
  double learning_rate = 0.21;
  int parallel_trees = 2;
  // The slowdown regression's forest, and how it weighs a variant `slower` (log2 of its time over the best) behind
  // the best: 1 / (1 + near_best_weight · slower), slowdowns clipped at 4× (a variant 4× or 40× slower is as wrong).
  int slowdown_rounds = 100;
  int slowdown_depth = 7;
  double near_best_weight = 10.0;
  // The ranker's share of the score (0: the slowdown regression alone); it lifts Kendall τ.
  double ranker_weight = 1.0;
  std::uint64_t seed = 1;
  std::string objective = "rank:pairwise";  // or rank:ndcg (graded relevance)
  int threads = 2;
};

class LearnedCpuModel : public CpuCostModel {
 public:
  ~LearnedCpuModel() override;
  // Parses a model document; throws InvalidArgument when it is not one (or was made for other features).
  // `name`: what the runtime's choice path calls it ("model:<name>": "learned", or "calibrated" for a host's own).
  static std::shared_ptr<const LearnedCpuModel> from_json(const std::string& text, const std::string& name = "learned");
  // `target` is the recording machine's (its ISA and FMA rate are the model's to cover).
  static std::shared_ptr<const LearnedCpuModel> train(const TrainingSet& set, const CpuTarget& target,
                                                      const TrainingOptions& options = {});
  std::string to_json() const;

  std::string name() const override { return name_; }
  // Lower is better: the predicted slowdown over its scale plus ranker_weight times the ranker score over its scale,
  // negated (both scales fixed at training, so a variant scores the same whatever it is ranked with; models without
  // them are standardised over `configs`). Scores compare only within one problem. A problem the training records
  // measured ranks their fastest variant first: the forests only approximate those measurements (on the Xeon records
  // they put 256³'s fastest, 6×64 in place over KC 384, behind a packed one 3% slower).
  std::vector<double> score(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs,
                            const CpuTarget& target) const override;
  const std::string& target() const { return target_; }
  // 512-bit FMAs per cycle of the machine that recorded the training set (AVX-512 models; 0 when not said).
  int vector_fmas_per_cycle() const { return vector_fmas_per_cycle_; }
  // Problems inside the range it was trained on: M, N, K, flops and the A and B footprints each within the training
  // set's extremes. Outside, learned models are known to lose to simpler ones (Kaufman et al., MLSys 2021), and here
  // they did (1024³: 246 GFLOP/s for the model's pick against 268 for default_for's; 1×4096×4096 with a 64 MB B:
  // 9.0 against 16.9), so callers fall back. A host whose AVX-512 FMA rate differs is not covered either: a model
  // trained on a Zen 4 chose 8×16 tiles for 256³ on a core with two full-width units, 81 GFLOP/s against 8×32's 152.
  bool covers(const GemmProblem& problem, const CpuTarget& target) const override;
  // The slowdown forest predicts log2 slowdowns, over slowdown_scale in the score.
  double score_per_doubling() const override { return slowdown_scale_ > 0 ? 1.0 / slowdown_scale_ : 0.0; }
  // Trained with the threads and the grid planner's split among its features (records of several thread counts).
  bool ranks_threads() const override { return ranks_threads_; }

 private:
  LearnedCpuModel() = default;
  static constexpr int kVersion =
      4;  // 2: slowdown regression joined the ranker; 3: features over the space's best; 4: base64 forests
  // Problem features whose training range bounds where the model is trusted (they do not depend on the config); see
  // covers().
  static const std::array<const char*, 11> kRangeFeatures;
  static std::size_t feature_index(const char* name);
  // The forests and the ranker's weight from a model document.
  void read_forests(const nlohmann::json& document);
  TreeEnsemble ranker_, slowdown_;
  double ranker_weight_ = 1.0;
  // Fixed scales of the two forests' scores (0: standardise over each call's candidates, as models before them did).
  double slowdown_scale_ = 0, ranker_scale_ = 0;
  std::string document_;  // the model as JSON, what to_json returns
  std::string target_;
  std::string name_ = "learned";
  int vector_fmas_per_cycle_ = 0;
  // Where the model's features are in cpu_feature_names() (empty: all of them, in that order).
  std::vector<std::size_t> columns_;
  bool ranks_threads_ = false;
  std::vector<double> range_min_, range_max_;           // of the features in kRangeFeatures, over the training set
  std::map<std::string, CpuGemmConfig> measured_best_;  // measured_problem_key → fastest measured config
};

}  // namespace tessera
