// The summary every held-out evaluation reports of a list of top-1 regrets (pick ÷ fastest − 1).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "generator/core/arith.hpp"

namespace tessera {

inline nlohmann::json regret_summary(const std::vector<double>& regret) {
  return {{"top1_regret_mean", mean(regret)},
          {"top1_regret_p90", quantile(regret, 0.9)},
          {"top1_regret_max", quantile(regret, 1.0)}};
}

}  // namespace tessera
