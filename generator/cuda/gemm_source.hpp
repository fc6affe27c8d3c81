// emit_cuda: a CUDA GEMM spec → a short, self-contained CUDA C++ source that instantiates the templates/ kernels
// with the config's constants and prints the epilogue and layouts from Expr.
#pragma once

#include <string>

#include "generator/gemm/cuda_gemm_spec.hpp"

namespace tessera {

struct CudaSource {
  std::string code;
  std::string kernel;         // extern "C" entry of the GEMM
  std::string reduce_kernel;  // the split-K reduction's entry, empty without split-K
  int threads = 0;            // block size of the GEMM kernel
  int reduce_threads = 256;
  std::int64_t shared_bytes = 0;  // dynamic shared memory of the GEMM kernel
};

// The spec must have passed validate().
CudaSource emit_cuda(const CudaGemmSpec& spec);

// A GEMM-shaped epilogue as a CUDA expression: acc, m, n, b and p (a GemmParams) in scope, and s for the sampled
// dialect. Every kernel with such an epilogue (GEMM, SpMM, SDDMM) prints it into its Epilogue::apply.
std::string cuda_epilogue_body(const GemmSignature& signature);

}  // namespace tessera
