// tessera-peak: measures this machine's FP32 FMA peak (GFLOP/s) per thread count, the yardstick for GEMM results.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

constexpr long kIterations = 200'000'000 / 16;

// 16 independent accumulator chains cover FMA latency × throughput on current x86 cores.
__attribute__((target("avx512f"))) float run_avx512() {
  __m512 acc[16];
  const __m512 x = _mm512_set1_ps(1e-8f), y = _mm512_set1_ps(0.999999f);
  for (auto& a : acc) a = x;
  for (long i = 0; i < kIterations; ++i)
    for (auto& a : acc) a = _mm512_fmadd_ps(a, y, x);
  for (int i = 1; i < 16; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  float out[16];
  _mm512_storeu_ps(out, acc[0]);
  return out[0];
}

// AVX2 has 16 vector registers: 12 chains leave room for the operands.
__attribute__((target("avx2,fma"))) float run_avx2() {
  __m256 acc[12];
  const __m256 x = _mm256_set1_ps(1e-8f), y = _mm256_set1_ps(0.999999f);
  for (auto& a : acc) a = x;
  for (long i = 0; i < kIterations; ++i)
    for (auto& a : acc) a = _mm256_fmadd_ps(a, y, x);
  for (int i = 1; i < 12; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  float out[8];
  _mm256_storeu_ps(out, acc[0]);
  return out[0];
}

// The register tile of a GEMM fed from L1: per K step MR broadcasts of A and V vectors of B, MR × V FMAs, over
// slivers that stay in L1 (K = 128: 4-8 KiB of A, 16-32 KiB of B). Against the FMA peak above it shows whether the
// core's loads are its own: on a shared VM another tenant on the load ports slows this and not the peak.
constexpr int kDepth = 128;
constexpr long kTilePasses = 200'000'000 / (16 * kDepth);

template <int MR, int V>
__attribute__((target("avx512f"))) float run_tile() {
  alignas(64) static thread_local float a[MR * kDepth], b[kDepth * V * 16];
  for (int i = 0; i < MR * kDepth; ++i) a[i] = 1e-8f * static_cast<float>(i % 7);
  for (int i = 0; i < kDepth * V * 16; ++i) b[i] = 0.5f + 1e-6f * static_cast<float>(i % 5);
  __m512 acc[MR][V];
  for (auto& row : acc)
    for (auto& x : row) x = _mm512_setzero_ps();
  for (long pass = 0; pass < kTilePasses * 16 / (MR * V); ++pass) {
    for (int k = 0; k < kDepth; ++k) {
      __m512 bv[V];
      for (int v = 0; v < V; ++v) bv[v] = _mm512_load_ps(b + (k * V + v) * 16);
      for (int r = 0; r < MR; ++r) {
        const __m512 av = _mm512_set1_ps(a[r * kDepth + k]);
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
      }
    }
    asm volatile("" : : "r"(a), "r"(b) : "memory");  // the slivers may have changed: reload them each pass
  }
  __m512 sum = _mm512_setzero_ps();
  for (auto& row : acc)
    for (auto& x : row) sum = _mm512_add_ps(sum, x);
  float out[16];
  _mm512_storeu_ps(out, sum);
  return out[0];
}

// One thread's GFLOP/s for the MR × V-vector tile, median of 3.
template <int MR, int V>
double measure_tile() {
  std::vector<double> results;
  for (int repeat = 0; repeat < 3; ++repeat) {
    const auto start = std::chrono::steady_clock::now();
    volatile float sink = run_tile<MR, V>();
    (void)sink;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double fmas = static_cast<double>(kTilePasses * 16 / (MR * V)) * kDepth * MR * V * 16;
    results.push_back(2.0 * fmas / s / 1e9);
  }
  std::sort(results.begin(), results.end());
  return results[1];
}

double measure(int threads, bool avx512) {
  std::vector<double> results;
  for (int repeat = 0; repeat < 3; ++repeat) {
    std::vector<std::thread> pool;
    std::vector<float> sink(static_cast<std::size_t>(threads));
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { sink[static_cast<std::size_t>(t)] = avx512 ? run_avx512() : run_avx2(); });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * (avx512 ? 16 * 16 : 12 * 8) * static_cast<double>(kIterations) * threads;
    results.push_back(flops / s / 1e9);
  }
  std::sort(results.begin(), results.end());
  return results[1];
}

}  // namespace

int main() {
  __builtin_cpu_init();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("FP32 FMA peak, median of 3 (GFLOP/s)\n%-8s %10s %10s\n", "threads", "avx512", "avx2");
  for (int t = 1; t <= cores; ++t) {
    const double wide = __builtin_cpu_supports("avx512f") ? measure(t, true) : 0.0;
    std::printf("%-8d %10.1f %10.1f\n", t, wide, measure(t, false));
  }
  if (__builtin_cpu_supports("avx512f"))
    std::printf("register tile fed from L1, 1 thread, median of 3 (GFLOP/s): 8x32 %.1f, 6x64 %.1f\n",
                measure_tile<8, 2>(), measure_tile<6, 4>());
}
