#include "ops/tuning/interleaved_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "generator/core/arith.hpp"
#include "jit/cache_eviction.hpp"

namespace tessera {

namespace {
double seconds(const std::function<void()>& call, int calls) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

std::vector<std::vector<double>> time_interleaved(std::size_t variants,
                                                  const std::function<TimingRound(unsigned seed)>& make_round,
                                                  const TimingOptions& options, std::uint64_t order_seed,
                                                  const std::function<void(int, int)>& progress) {
  const auto timed_seconds = [&](const TimingRound& round, const std::function<void()>& call, int calls) {
    return options.cold ? cold_call_seconds(call, calls, round.cold_data, round.cold_bytes) : seconds(call, calls);
  };
  if (variants == 0) return {};
  std::vector<double> once(variants, INFINITY);  // seconds per call, from calibration
  std::vector<int> calls(variants, 1);
  std::vector<std::vector<double>> samples(variants);
  {
    const TimingRound round = make_round(17u);
    // The fastest of three calls: a single call of a short kernel hit by an interrupt or a slow spell of the VM
    // looked 4x slower and dropped the variant with that one time.
    const auto calibrate = [&](std::size_t i) {
      const std::function<void()> call = round.prepare(i);
      for (int c = 0; c < 3; ++c) once[i] = std::min(once[i], timed_seconds(round, call, 1));
      calls[i] = static_cast<int>(std::clamp(options.sample_ms / 1e3 / std::max(once[i], 1e-9), 1.0, 1e6));
    };
    for (std::size_t i = 0; i < variants; ++i) {
      seconds([&] { round.prepare(i)(); }, 1);  // warm-up
      calibrate(i);
    }
    // A variant more than 4x slower than the fastest is calibrated once more before it is dropped: three calls in
    // a row can all land in one slow spell.
    const double fastest = *std::min_element(once.begin(), once.end());
    for (std::size_t i = 0; i < variants; ++i)
      if (once[i] > 4 * fastest) calibrate(i);
  }
  // A variant still more than 4x slower keeps its calibration as its one sample: its rank is not in doubt, and
  // timing it fully cost most of an exhaustive run.
  const double fastest = *std::min_element(once.begin(), once.end());
  std::vector<std::size_t> contenders;
  for (std::size_t i = 0; i < variants; ++i) {
    if (once[i] > 4 * fastest)
      samples[i].push_back(once[i] * 1e9);
    else
      contenders.push_back(i);
  }
  std::mt19937_64 shuffle(order_seed);
  int done = 0, total = static_cast<int>(contenders.size()) * options.samples;
  const auto measure_rounds = [&](std::vector<std::size_t> who, int rounds, unsigned first_seed) {
    for (int r = 0; r < rounds && !who.empty(); ++r) {
      const TimingRound round = make_round(first_seed + static_cast<unsigned>(r));
      std::shuffle(who.begin(), who.end(), shuffle);
      round.prepare(who[0])();  // the fresh operands into the caches
      for (std::size_t i : who) {
        const std::function<void()> call = round.prepare(i);
        samples[i].push_back(timed_seconds(round, call, calls[i]) / calls[i] * 1e9);
        if (progress) progress(++done, total);
      }
    }
  };
  measure_rounds(contenders, options.samples, 18u);
  // The near-best get more rounds (their medians are over all their samples), when there is a choice among them.
  if (options.refine_samples > 0 && contenders.size() > 1) {
    double best_median = INFINITY;
    for (std::size_t i : contenders) best_median = std::min(best_median, median(samples[i]));
    std::vector<std::size_t> close;
    for (std::size_t i : contenders)
      if (median(samples[i]) <= best_median * (1.0 + options.refine_within)) close.push_back(i);
    if (close.size() > 1) {
      total += static_cast<int>(close.size()) * options.refine_samples;
      measure_rounds(close, options.refine_samples, 18u + static_cast<unsigned>(options.samples));
    }
  }
  return samples;
}

}  // namespace tessera
