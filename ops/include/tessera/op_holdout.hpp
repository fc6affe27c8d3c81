// The runtime's own choice for the other operations held out for real, as `model holdout` holds out GEMM's:
// problems drawn at random outside the benchmark suites, each timed over its whole variant space, and the regret of
// the config the runtime picks (default_for) beside the analytic model's top choice, with a second timing of the
// leaders as the noise floor. SpMM: uniform, power-law, banded and block-pruned patterns (sides, density and N
// log-uniform), timed on the form Runtime::spmm stores the pattern in (a CSR pattern that clusters runs as BSR);
// SDDMM: the same patterns and K; attention: prefill and decoding, multi-head, grouped and multi-query, causal or not.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/tuner.hpp"

namespace tessera {

struct OpHoldoutOptions {
  std::string op = "spmm";  // spmm, sddmm or attention
  int problems = 20;
  std::uint64_t seed = 1;
  // Work drawn at most, in multiply-adds (SpMM: stored entries × N, SDDMM: × K; attention: half its flops), so that an
  // exhaustive timing of one problem stays within seconds.
  double max_macs = double(1 << 26);
  int retest_top = 3;  // the first timing's leaders timed again, with the pick, for the noise floor
  TuneOptions timing;  // samples, sample_ms (top_k and exhaustive are not used)
  // Cases no draw may take, as the suites write them ("PATTERN DENSE", e.g. "uniform:4096,4096,0.005,1 64"; for
  // attention the problem's text below).
  std::vector<std::string> excluded;
};

struct HoldoutProblem {
  // SpMM and SDDMM: a generate_pattern request and N or K. Attention: "BxH/KVxSQ:SKV dD[ causal]" in `text`.
  std::string text;
  std::int64_t dense = 0;
  std::string kind;  // uniform, powerlaw, banded or blocks; prefill or decode
  std::string key() const { return dense > 0 ? text + " " + std::to_string(dense) : text; }
};

// The problems op_holdout draws for these options (deterministic in the seed). Throws InvalidArgument for bad
// options.
std::vector<HoldoutProblem> draw_op_holdout(const OpHoldoutOptions& options);

// {"op", "problems", "threads", "target", "seed", "runtime", "runtime_retest", "analytic", "noise_floor" (each
// {"top1_regret_mean", "top1_regret_p90", "top1_regret_max"}), "by_kind" {kind: {"problems", "runtime"}},
// "cases": [...]}. `records` (may be null) keeps the first timing (op spmm, sddmm or attention, family
// "holdout-<kind>").
nlohmann::json op_holdout(Runtime& runtime, const OpHoldoutOptions& options, MeasurementStore* records,
                          const std::function<void(int, int, const std::string&)>& progress = {});

}  // namespace tessera
