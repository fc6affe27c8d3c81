// Choosing a cost model by name: "default" (this host's calibrated model where `tessera model calibrate` made one,
// else the learned model shipped for this CPU target; when none was trained for it, default_for's config first and
// the analytic order after it), "shipped" (the shipped one whatever calibration did), "analytic", "heuristic"
// (default_for's rules: no ranking), or a model file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "generator/cost/cost_model.hpp"

namespace tessera {

struct LoadedCostModel {
  std::shared_ptr<const CpuCostModel> model;  // null for "heuristic"
  std::string note;                           // why this model, when it is not the one asked for
};

LoadedCostModel load_cpu_cost_model(const std::string& which, const CpuTarget& target);

// What a thread of a batch split over `threads` computes: its share of the matrices, which its core's caches hold as
// a one-thread call of that batch would, and one-thread calls are what a model's one-thread records timed.
GemmProblem thread_share(GemmProblem p, int threads);

// What a model trained on several thread counts (CpuCostModel::ranks_threads) ranks for `p` run on `threads`: a
// batch of at least `threads` matrices is split by matrices, each thread's share a one-thread problem; a smaller one
// is split within its matrices, and the problem carries its threads.
GemmProblem problem_on_threads(const GemmProblem& p, int threads);

// The share of one thread's time that the grid planner expects the busiest of `threads` to take with `config` (1 on
// one thread): uneven tiles, B packed per tile, a cached B split by columns.
double split_share(const GemmProblem& whole, const CpuGemmConfig& config, int threads);

// A model's scores for a GEMM run on `threads`: each config's predicted time scaled, on the model's log scale
// (CpuCostModel::score_per_doubling), by its split_share. `ranked` is what the model sees (a thread's share of a
// batch, B cold or warm), `whole` what the planner splits. A model trained on several thread counts sees `ranked`
// with its threads as problem_on_threads describes, the split among its features, and the planner's estimate is
// still added as a prior: a few hundred two-thread problems (Zen 4) do not teach the forests every uneven split
// (held out, 2 threads, 150 shapes judged on the same timings: 5.1% mean regret with the estimate added, 7.4% without
// it in an earlier run, 6.9% for a model of the times over the estimate, 7.1% for the one-thread model with it). A
// model of one-thread records sees the one-thread problem.
std::vector<double> score_on_threads(const CpuCostModel& model, const GemmProblem& whole, const GemmProblem& ranked,
                                     const std::vector<CpuGemmConfig>& space, const CpuTarget& target, int threads);

// The learned models compiled into tessera (models/*.json at build time): model text for a target, or empty.
const std::string& shipped_model_text(const std::string& target);

// Where `tessera model calibrate` keeps this host's model for a target, and where "default" looks for it first:
// $TESSERA_CACHE_DIR/models/<target's model key>-<hash of this host's description>.json (another kind of host sharing
// the directory does not take it). Empty when no cache directory can be named.
std::string calibrated_model_path(const CpuTarget& target);

}  // namespace tessera
