// The runtime's own SpMM and SDDMM choices held out for real, as `model holdout` holds out GEMM's: problems drawn at
// random (pattern kind, sides, density, the dense width) outside the benchmark suites, each timed over its whole
// variant space on the form the runtime stores the pattern in (a CSR pattern that clusters runs as BSR), and the
// regret of the config the runtime picks (default_for) beside the analytic model's top choice, with a second timing
// of the leaders as the noise floor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/tuner.hpp"

namespace tessera {

struct SparseHoldoutOptions {
  std::string op = "spmm";  // spmm or sddmm
  int problems = 20;
  std::uint64_t seed = 1;
  // Work drawn at most: stored entries × the dense width (N for SpMM, K for SDDMM), so that an exhaustive timing
  // of one problem stays within seconds.
  double max_macs = double(1 << 26);
  int retest_top = 3;  // the first timing's leaders timed again, with the pick, for the noise floor
  TuneOptions timing;  // samples, sample_ms (top_k and exhaustive are not used)
  // Cases no draw may take, as the suites write them: "PATTERN DENSE" (e.g. "uniform:4096,4096,0.005,1 64").
  std::vector<std::string> excluded;
};

struct SparseHoldoutProblem {
  std::string pattern;  // a generate_pattern request
  std::int64_t dense = 0;
  std::string kind;  // uniform, powerlaw, banded or blocks
};

// The problems sparse_holdout draws for these options (deterministic in the seed). Throws InvalidArgument for bad
// options.
std::vector<SparseHoldoutProblem> draw_sparse_holdout(const SparseHoldoutOptions& options);

// {"op", "problems", "threads", "target", "seed", "runtime", "runtime_retest", "analytic", "noise_floor" (each
// {"top1_regret_mean", "top1_regret_p90", "top1_regret_max"}), "by_kind" {kind: {"problems", "runtime"}},
// "cases": [...]}. `records` (may be null) keeps the first timing (op "spmm" or "sddmm", family "holdout-<kind>").
nlohmann::json sparse_holdout(Runtime& runtime, const SparseHoldoutOptions& options, MeasurementStore* records,
                              const std::function<void(int, int, const std::string&)>& progress = {});

}  // namespace tessera
