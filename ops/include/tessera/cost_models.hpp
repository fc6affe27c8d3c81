// Choosing a cost model by name: "default" (the learned model shipped for this CPU target; when none was trained
// for it, default_for's config first and the analytic order after it), "analytic", "heuristic" (default_for's rules: no
// ranking), or a model file.
#pragma once

#include <memory>
#include <string>

#include "generator/cost/cost_model.hpp"

namespace tessera {

struct LoadedCostModel {
  std::shared_ptr<const CpuCostModel> model;  // null for "heuristic"
  std::string note;                           // why this model, when it is not the one asked for
};

LoadedCostModel load_cpu_cost_model(const std::string& which, const CpuTarget& target);

// The learned models compiled into tessera (models/*.json at build time): model text for a target, or empty.
const std::string& shipped_model_text(const std::string& target);

}  // namespace tessera
