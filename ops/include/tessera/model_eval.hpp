// Evaluating the cost models against tuning records: for each measured problem, how good is the variant a model
// picks (top-1 regret), is the best among its top 5, how well does its order agree with the measured one (Kendall
// τ), and how many of its candidates must be measured to reach 98% / 99% of the exhaustive best. Held-out problems
// only: 5-fold random cross-validation, or leave-one-family-out.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generator/cost/learned_model.hpp"
#include "tessera/tuning_records.hpp"

namespace tessera {

struct RecordedProblem {
  GemmProblem problem;
  std::string family;
  std::vector<CpuGemmConfig> configs;
  std::vector<double> ns;    // measured median per config
  double spread = 0;         // median relative spread of its measurements
  std::string hardware;      // the machine that measured it, as records describe it
  std::vector<int> samples;  // times each config was timed (1: dropped by the tuner after one look; empty: unknown)
};

// Which machines' records make problems: the most common one's, or every machine's (the same shape timed on two
// machines is two problems, each with its machine's description: one model trained for several host kinds).
enum class RecordedHosts { most_common, every };

// Groups one target's records (one hardware or each; each thread count apart) into problems with at least two
// measured variants, in a stable order. Hardware descriptions that name the same caches and FMA rate (written by
// different tessera versions) count as one.
std::vector<RecordedProblem> recorded_problems(const std::vector<TuningRecord>& records, const std::string& target,
                                               RecordedHosts hosts = RecordedHosts::most_common);

// Each problem's features as its recording machine saw them: `target` with that machine's caches and FMA rate.
TrainingSet training_set(const std::vector<RecordedProblem>& problems, const CpuTarget& target);

// split: "random", "family" or "host" (one fold per recording machine). Returns {"learned": {...}, "analytic": {...},
// "default": {...}, "noise_floor", "problems", "split", ...}; each model holds top1_regret_mean/p90/max, top5_score,
// kendall_tau, measurements_to_98, measurements_to_99. "runtime" is the top-1 the runtime would compile (the learned
// model's where its training covers the problem, default_for's elsewhere; "runtime_fallbacks" counts the latter).
// `scored_families` (empty: all) limits which held-out problems are scored; every family still trains the models.
// With `retest` (the same problems measured again, e.g. by a second tuning run), the report also holds
// "retest": the regret of the first run's best variant as the second run times it — the measurement noise floor of
// a top-1 regret, which no model can be judged below.
nlohmann::json evaluate_cost_models(const std::vector<RecordedProblem>& problems, const std::string& split,
                                    const CpuTarget& target, const TrainingOptions& options = {},
                                    const std::vector<RecordedProblem>& retest = {},
                                    const std::set<std::string>& scored_families = {});

// {"problems", "regret_mean", "regret_p90", "regret_max", "by_family": {family: mean}}: the best variant of each
// problem in `first`, judged by `second`'s times (variants measured in both).
nlohmann::json retest_regret(const std::vector<RecordedProblem>& first, const std::vector<RecordedProblem>& second);

// {"groups", "spread_median", "spread_p90", "spread_max"}: within each problem, variants that do identical work
// (they differ only in cache blocks larger than the problem: one K slab, one macro-tile), grouped, and each group's
// slowest / fastest − 1. A noise probe from the records alone: a model cannot tell such twins apart, so their
// spread is regret that no ranking removes.
nlohmann::json twin_variant_spread(const std::vector<RecordedProblem>& problems);

}  // namespace tessera
