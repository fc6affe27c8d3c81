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

// A model's scores (one thread's records) for a GEMM run on `threads`: each config's time scaled, on the model's log
// scale (CpuCostModel::score_per_doubling), by the share of one thread's time the grid planner expects the busiest
// thread to take with that config (tiles that split unevenly, B packed per tile, a cached B split by columns).
// `ranked` is what the model sees (a thread's share of a batch, B cold or warm), `whole` what the planner splits.
std::vector<double> score_on_threads(const CpuCostModel& model, const GemmProblem& whole, const GemmProblem& ranked,
                                     const std::vector<CpuGemmConfig>& space, const CpuTarget& target, int threads);

// The learned models compiled into tessera (models/*.json at build time): model text for a target, or empty.
const std::string& shipped_model_text(const std::string& target);

// Where `tessera model calibrate` keeps this host's model for a target, and where "default" looks for it first:
// $TESSERA_CACHE_DIR/models/<target's model key>-<hash of this host's description>.json (another kind of host sharing
// the directory does not take it). Empty when no cache directory can be named.
std::string calibrated_model_path(const CpuTarget& target);

}  // namespace tessera
