// CudaGemmSpec: {problem signature, CUDA config, CUDA target}, the unit of CUDA compilation, caching and naming.
#pragma once

#include <string>

#include "generator/core/cuda_target.hpp"
#include "generator/core/hash.hpp"
#include "generator/gemm/cuda_gemm_config.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

struct KernelSpec;  // generator/core/kernel_spec.hpp

struct CudaGemmSpec {
  GemmSignature signature;
  CudaGemmConfig config;
  CudaTarget target;

  // The op-tagged spec that serialises and hashes it.
  KernelSpec generic() const;
  std::string canonical_json() const;
  Hash128 hash() const;
  // A valid C symbol, e.g. gemm_f16f16f32_rcrr_tc128x128x32_w64x64_s4_ab_sm80_1a2b3c4d; it is the kernel's
  // extern "C" entry name in the generated source.
  std::string name() const;
};

}  // namespace tessera
