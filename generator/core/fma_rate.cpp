#include "generator/core/fma_rate.hpp"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

namespace tessera {

namespace {

// Enough independent accumulators for either kind of core (2 units × latency 4 = 8 in flight), and few enough that
// the AVX2 loop's accumulators and two operands fit its 16 registers: with 16 chains GCC -O3 kept three on the stack,
// whose store-to-load latency slowed the 256-bit loop so much that a Zen 4 (512-bit FMAs split in halves) measured
// as a core with two full-width units.
constexpr int kChains = 12;
constexpr long kIterations = 4096;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Seconds for kIterations × kChains FMAs of each width; the sink keeps the loops from being folded away.
__attribute__((target("avx512f"))) double time_zmm(float& sink) {
  __m512 acc[kChains];
  const __m512 x = _mm512_set1_ps(1e-8f), y = _mm512_set1_ps(0.999999f);
  for (auto& a : acc) a = x;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < kIterations; ++i)
    for (auto& a : acc) a = _mm512_fmadd_ps(a, y, x);
  const double s = seconds_since(start);
  for (int i = 1; i < kChains; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  float lanes[16];
  _mm512_storeu_ps(lanes, acc[0]);
  sink += lanes[0];
  return s;
}

__attribute__((target("avx2,fma"))) double time_ymm(float& sink) {
  __m256 acc[kChains];
  const __m256 x = _mm256_set1_ps(1e-8f), y = _mm256_set1_ps(0.999999f);
  for (auto& a : acc) a = x;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < kIterations; ++i)
    for (auto& a : acc) a = _mm256_fmadd_ps(a, y, x);
  const double s = seconds_since(start);
  for (int i = 1; i < kChains; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc[0]);
  sink += lanes[0];
  return s;
}

int measure() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("fma")) return 0;
  // Every x86 core with FMA issues two 256-bit FMAs per cycle; a 512-bit one takes as long as a 256-bit one on a
  // full-width core and twice as long where it is split in halves. The fastest of several alternated rounds: the
  // first 512-bit instructions may run slowly while the core raises its power level, and an interrupt may hit any.
  float sink = 0;
  double zmm = 1e9, ymm = 1e9;
  for (int round = 0; round < 7; ++round) {
    zmm = std::min(zmm, time_zmm(sink));
    ymm = std::min(ymm, time_ymm(sink));
  }
  volatile float keep = sink;
  (void)keep;
  return zmm < 1.5 * ymm ? 2 : 1;
}

}  // namespace

int host_avx512_fmas_per_cycle() {
  static const int rate = measure();
  return rate;
}

}  // namespace tessera
