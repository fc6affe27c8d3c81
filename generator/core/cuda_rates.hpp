// CudaRates: what the flagship part of an NVIDIA architecture can do per SM and per clock (tensor cores, FFMA,
// shared memory, instruction issue) and as a device (L2, DRAM): the roofline every CUDA time estimate stays under.
// Figures from NVIDIA's architecture whitepapers and datasheets (A100 SXM, RTX 3090, RTX 4090, H100 SXM).
#pragma once

#include "generator/core/cuda_target.hpp"
#include "generator/core/dtype.hpp"

namespace tessera {

struct CudaRates {
  double clock_hz = 0;      // the clock the published peaks assume
  double sustained = 1;     // the share of that clock held under a long tensor-core load (power and thermal limits)
  double mma_sync = 0;      // f16/bf16 dense FLOP per SM per clock through mma.sync, f32 accumulate (tf32: half)
  double wgmma = 0;         // the same through wgmma.mma_async (sm_90); 0 where the instruction does not exist
  double ffma = 0;          // f32 FLOP per SM per clock through FFMA (two per lane)
  double shared_bytes = 0;  // shared-memory bytes per SM per clock (32 banks of 4 bytes)
  double issue = 4;         // warp instructions issued per SM per clock (one per scheduler)
  double l2_bytes_per_s = 0;
  double l2_bytes = 0;  // L2 capacity
  double dram_bytes_per_s = 0;
  double dram_latency_s = 0;  // a global load's round trip: the bytes in flight a bandwidth needs (Little's law)
};

CudaRates cuda_rates(const CudaTarget& target);

// The device's peak FLOP/s for inputs of `input` type: mma.sync for f16, bf16 and tf32 (wgmma's where `wgmma`), FFMA
// for f32.
double cuda_peak_flops(const CudaTarget& target, DType input, bool wgmma = false);

}  // namespace tessera
