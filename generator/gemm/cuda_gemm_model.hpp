// The analytic time of a CUDA GEMM on the target's flagship part, built from what bounds it physically: the SM's
// tensor-core (or FFMA) rate shared by the blocks resident on it, instruction issue, shared-memory bandwidth, the
// bytes in flight each block keeps against the memory latency, L2 and DRAM bandwidth, and the waves of blocks with
// their tail. No estimate exceeds the architecture's sustained peak.
#pragma once

#include <string_view>

#include "generator/core/cuda_target.hpp"
#include "generator/gemm/cuda_gemm_config.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

struct CudaGemmEstimate {
  double seconds = 0;
  std::string_view bound;  // the resource that set the time: tensor, ffma, issue, shared, latency, l2, dram, launch
  double sm_busy = 0;      // the SMs' mean occupancy over the kernel: 1 when every wave is full
};

CudaGemmEstimate cuda_gemm_estimate(const GemmProblem& problem, const CudaGemmConfig& config, const CudaTarget& target);

// Main-loop instructions of one warp per k-tile: the mma (or FFMA) and everything else (fragment loads, copies,
// addressing, the barrier), as the kernels in templates/gemm issue them.
struct CudaMainLoopCounts {
  double math = 0;
  double other = 0;
};
CudaMainLoopCounts cuda_main_loop_counts(const GemmSignature& signature, const CudaGemmConfig& config);

inline double cuda_analytic_seconds(const GemmProblem& problem, const CudaGemmConfig& config,
                                    const CudaTarget& target) {
  return cuda_gemm_estimate(problem, config, target).seconds;
}

}  // namespace tessera
