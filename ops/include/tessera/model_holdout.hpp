// The runtime's own GEMM choice held out for real: shapes drawn at random outside every suite, each timed over its
// whole variant space, and the regret of the kernel the runtime picks on its own (through whichever path picks it:
// the learned model, default_for's rules outside the model's range, ...) beside what default_for, the analytic model
// and the learned model alone would have picked, with a second timing of the leaders as the noise floor. Each shape is
// timed in the condition the runtime ranked it for (B warm, or B evicted before each call:
// Runtime::GemmChoice::b_cold).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generator/gemm/shape_suite.hpp"
#include "tessera/tuner.hpp"

namespace tessera {

struct HoldoutOptions {
  int shapes = 30;
  std::uint64_t seed = 1;
  // Sizes log-uniform: a skinny share with M in [1, 64] and N, K in [256, 4096]; the rest with M, N, K in
  // [min_dim, max_dim]; redrawn while M·N·K exceeds max_macs (a call's time bounds an exhaustive run's).
  double skinny_share = 0.25;
  std::int64_t min_dim = 8, max_dim = 2048;
  double max_macs = double(1 << 27);
  std::vector<SuiteShape> excluded;  // shapes no draw may take (the suites')
  int retest_top = 4;                // the first timing's leaders timed again, with the picks, for the noise floor
  TuneOptions timing;                // samples, sample_ms, refine_samples (top_k and exhaustive are not used)
  // The runtime's cost model (RuntimeOptions::cost_model: "default", "analytic", "heuristic" or a model file), also
  // the "learned" column's.
  std::string model = "default";
  // Other cost models (names or files) whose picks, as the runtime would make them with each (the threads' split,
  // the rules outside the model's range), are judged on the same timings: a paired comparison, free of the
  // run-to-run noise two separate runs would add.
  std::vector<std::string> compare;
};

// The shapes draw_holdout_shapes gives for these options (deterministic in the seed).
std::vector<SuiteShape> draw_holdout_shapes(const HoldoutOptions& options);

// {"shapes", "threads", "target", "seed", "runtime", "runtime_retest", "default", "analytic", "learned" (each
// {"top1_regret_mean", "top1_regret_p90", "top1_regret_max"}), "noise_floor" (the same over the first timing's best
// as the second timing judges it), "paths" {path: picks}, "regret_by_path" {path: mean}, "compare" {model: the same
// summary}, "by_condition" {"b_warm"|"b_cold": {"shapes", "runtime", "default"}}, "problems": [...]}.
// `records` (may be null) keeps the first timing of every variant. `progress(done, total, line)` follows each shape.
nlohmann::json model_holdout(Runtime& runtime, const HoldoutOptions& options, MeasurementStore* records,
                             const std::function<void(int, int, const std::string&)>& progress = {});

}  // namespace tessera
