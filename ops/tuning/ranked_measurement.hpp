// The loop the attention and sparse tuners share: the top of a ranked variant space, each variant already on record
// taken from the records, the others compiled, timed in interleaved rounds on fresh operands, and recorded.
#pragma once

#include <cmath>
#include <functional>
#include <vector>

#include "generator/cost/cost_model.hpp"
#include "ops/tuning/interleaved_timing.hpp"
#include "ops/tuning/measurement_log.hpp"
#include "tessera/tuner.hpp"

namespace tessera {

// The protocol's options from a tuning's (B cold is GEMM's alone: its tuner sets TimingOptions::cold).
inline TimingOptions timing_options(const TuneOptions& o) {
  TimingOptions t;
  t.samples = o.samples;
  t.sample_ms = o.sample_ms;
  t.refine_samples = o.refine_samples;
  t.refine_within = o.refine_within;
  return t;
}

// `spec_of(config)` is the spec a compile of `config` makes (its hash keys the records); `make_round(kernels, seed)`
// allocates operands and prepares the calls of `kernels` on them.
template <class Config, class Kernel, class SpecOf, class Compile, class MakeRound, class Cycles>
VariantTuneResult<Config> measure_ranked(const std::vector<Config>& space, const std::vector<double>& scores,
                                         const TuneOptions& options, MeasurementLog& log, SpecOf spec_of,
                                         Compile compile, MakeRound make_round, Cycles cycles, std::uint64_t order_seed,
                                         const std::function<void(int, int)>& progress) {
  const std::vector<std::size_t> order = rank_by_score(scores);
  const std::size_t take = options.exhaustive ? space.size() : std::min<std::size_t>(options.top_k, space.size());
  VariantTuneResult<Config> result;
  result.space = space.size();
  std::vector<Kernel> kernels;
  std::vector<std::size_t> timed_at;  // the place in result.measured of each kernel timed now
  for (std::size_t i = 0; i < take; ++i) {
    MeasuredVariant<Config> m;
    m.config = space[order[i]];
    m.spec_hash = spec_of(m.config).hash().hex();
    m.predicted_cycles = cycles(m.config);
    m.median_ns = log.recorded_ns(m.spec_hash);
    m.from_records = m.median_ns >= 0;
    if (!m.from_records) {
      kernels.push_back(compile(m.config));
      timed_at.push_back(result.measured.size());
    }
    result.measured.push_back(m);
  }
  const auto timed = time_interleaved(
      kernels.size(), [&](unsigned seed) { return make_round(kernels, seed); }, timing_options(options), order_seed,
      progress);
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    MeasuredVariant<Config>& m = result.measured[timed_at[k]];
    const SampleSummary summary = summarise(timed[k]);
    m.median_ns = summary.median_ns;
    m.spread = summary.spread;
    log.add(m.spec_hash, to_json(m.config).dump(), summary);
  }
  log.commit();
  double best = INFINITY;
  for (std::size_t i = 0; i < result.measured.size(); ++i)
    if (result.measured[i].median_ns < best) best = result.measured[i].median_ns, result.best = i;
  return result;
}

}  // namespace tessera
