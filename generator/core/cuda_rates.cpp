#include "generator/core/cuda_rates.hpp"

namespace tessera {

CudaRates cuda_rates(const CudaTarget& target) {
  CudaRates r;
  r.shared_bytes = 128;
  r.issue = 4;
  switch (target.sm) {
    case 86:  // RTX 3090: 82 SMs; GeForce tensor cores run f32-accumulating f16 at half the f16-accumulating rate
      r.clock_hz = 1.695e9, r.sustained = 0.9, r.mma_sync = 512, r.ffma = 256;
      r.l2_bytes_per_s = 2.5e12, r.l2_bytes = 6.0 * (1 << 20), r.dram_bytes_per_s = 936e9, r.dram_latency_s = 500e-9;
      break;
    case 89:  // RTX 4090: 128 SMs
      r.clock_hz = 2.52e9, r.sustained = 0.9, r.mma_sync = 512, r.ffma = 256;
      r.l2_bytes_per_s = 5.0e12, r.l2_bytes = 72.0 * (1 << 20), r.dram_bytes_per_s = 1008e9, r.dram_latency_s = 500e-9;
      break;
    case 90:  // H100 SXM: 132 SMs; 989 TFLOP/s dense f16 through wgmma at 1.83 GHz. mma.sync issues from one warp
              // at a time per tensor core and reaches about two thirds of that.
      r.clock_hz = 1.83e9, r.sustained = 0.9, r.mma_sync = 2730, r.wgmma = 4096, r.ffma = 256;
      r.l2_bytes_per_s = 10.0e12, r.l2_bytes = 50.0 * (1 << 20), r.dram_bytes_per_s = 3.35e12,
      r.dram_latency_s = 650e-9;
      break;
    default:  // 80, A100 SXM: 108 SMs, 312 TFLOP/s dense f16 at 1.41 GHz, 19.5 f32
      r.clock_hz = 1.41e9, r.sustained = 0.9, r.mma_sync = 2048, r.ffma = 128;
      r.l2_bytes_per_s = 5.0e12, r.l2_bytes = 40.0 * (1 << 20), r.dram_bytes_per_s = 1.555e12,
      r.dram_latency_s = 550e-9;
      break;
  }
  return r;
}

double cuda_peak_flops(const CudaTarget& target, DType input, bool wgmma) {
  const CudaRates r = cuda_rates(target);
  const double tensor = wgmma && r.wgmma > 0 ? r.wgmma : r.mma_sync;
  const double per_clock = input == DType::f32 ? r.ffma : input == DType::tf32 ? tensor / 2 : tensor;
  return per_clock * target.sm_count * r.clock_hz;
}

}  // namespace tessera
