// How every benchmark here times a call: calibrated samples of back-to-back calls, each after a settle pause and
// an untimed call, interleaved across contenders by the caller; medians of the samples. Optionally with B cold.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "generator/core/arith.hpp"
#include "jit/cache_eviction.hpp"

namespace tessera::bench {

struct Sampling {
  double sample_ms = 20;
  // OpenBLAS's threads spin for about 2^28 cycles after a call and OpenMP's for a while; the pause lets them go
  // idle before the next contender runs.
  double settle_ms = 100;

  // With cold set, every timed call first evicts [cold, cold + cold_bytes) (B) from the caches, untimed.
  const void* cold = nullptr;
  std::size_t cold_bytes = 0;

  // Calls per sample so that a sample lasts about sample_ms. The first call only warms up: it pays for first
  // touches and thread start-up (26 us against 4 warm at 64^3), and sizing samples from it made small shapes'
  // samples several times shorter than intended. Then ever more warm calls are timed until a count spans ~1 ms.
  int calibrate(const std::function<void()>& call) const {
    call();
    double per_call = 0;
    for (int calls = 1;; calls *= 2) {
      const double t = timed(call, calls);
      per_call = t / calls;
      if (t >= 1e-3 || calls >= (1 << 16)) break;
    }
    return static_cast<int>(std::clamp(sample_ms / 1e3 / std::max(per_call, 1e-9), 1.0, 1e6));
  }

  // Seconds per call over one sample; `settle` false skips the pause (where no other library's threads can be
  // spinning: see the GEMM benchmark).
  double sample(const std::function<void()>& call, int calls, bool settle = true) const {
    if (settle) this->settle();
    call();
    return timed(call, calls) / calls;
  }

  void settle() const { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(settle_ms)); }

  double timed(const std::function<void()>& call, int calls) const {
    return cold ? cold_call_seconds(call, calls, cold, cold_bytes) : seconds(call, calls);
  }

  static double seconds(const std::function<void()>& call, int calls) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

// The median over rounds of ours[i] / theirs[i]: samples taken in the same round, a few milliseconds apart, see the
// same machine. On a VM whose speed changes for a few samples at a time (every library at half speed for 4 of 7
// rounds), the ratio of the two medians can pick a slow sample for one and a fast one for the other; the paired
// ratio cannot.
inline double paired_median_ratio(const std::vector<double>& ours, const std::vector<double>& theirs) {
  std::vector<double> ratios;
  for (std::size_t i = 0; i < std::min(ours.size(), theirs.size()); ++i)
    if (theirs[i] > 0) ratios.push_back(ours[i] / theirs[i]);
  return median(std::move(ratios));
}

}  // namespace tessera::bench
