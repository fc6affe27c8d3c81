// tessera's CUDA GEMMs against cuBLAS on the same device buffers: CUDA-event timing after a warm-up, operands
// rotated through enough copies to exceed L2, results cross-checked.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/gemm_peer.hpp"
#include "generator/core/dtype.hpp"
#include "generator/core/layout.hpp"

namespace tessera::bench {

struct CudaBenchmarkOptions {
  std::string target = "cuda";
  DType dtype = DType::f16;
  std::vector<std::pair<Layout, Layout>> layouts;  // (A, B)
  int repeat = 10;
};

// One JSON object per shape × layout pair ({m, n, k, layout, tessera_tflops, cublas_tflops, ratio, ...}), passed to
// on_row as it is measured; returns the report. Throws Unavailable (with the reason) without a usable GPU.
nlohmann::json run_cuda_benchmark(const std::vector<GemmShape>& shapes, const CudaBenchmarkOptions& options,
                                  const std::function<void(const nlohmann::json&)>& on_row);

}  // namespace tessera::bench
