// The measurement protocol of every tuner, whatever the operation: each variant's call count calibrated to a sample
// length, then interleaved rounds on freshly allocated operands (every round times every contender once, in a new
// random order), so a slow spell of the shared machine lands on all variants alike and the median over rounds is a
// median over physical page placements. The operation supplies the operands and the prepared calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace tessera {

// One allocation of a problem's operands and the variants' calls on them.
struct TimingRound {
  std::shared_ptr<const void> operands;                               // alive while the round's calls run
  std::function<std::function<void()>(std::size_t variant)> prepare;  // the variant's call on these operands
  // Evicted from every cache level before each timed call when TimingOptions::cold (a layer's weights, say).
  const void* cold_data = nullptr;
  std::size_t cold_bytes = 0;
};

struct TimingOptions {
  int samples = 5;         // rounds
  double sample_ms = 2.0;  // a sample repeats the call for about this long
  int refine_samples = 0;  // rounds more for the variants within refine_within of the best median
  double refine_within = 0.10;
  bool cold = false;  // time each call alone, after evicting the round's cold data
};

// Nanoseconds per call of each of `variants`, one entry per sample. A variant still more than 4x slower than the
// fastest after a second calibration keeps its calibration as its one sample. `make_round(seed)` allocates operands
// (seed 17 for calibration, 18 on for the rounds); `order_seed` seeds the rounds' orders; `progress(done, total)`
// follows each timed sample.
std::vector<std::vector<double>> time_interleaved(std::size_t variants,
                                                  const std::function<TimingRound(unsigned seed)>& make_round,
                                                  const TimingOptions& options, std::uint64_t order_seed,
                                                  const std::function<void(int, int)>& progress = {});

}  // namespace tessera
