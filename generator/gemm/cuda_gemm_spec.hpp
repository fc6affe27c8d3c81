// CudaGemmSpec: {problem signature, CUDA config, CUDA target}, the unit of CUDA compilation, caching and naming.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "generator/core/cuda_target.hpp"
#include "generator/core/kernel_spec.hpp"
#include "generator/gemm/cuda_gemm_config.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

struct CudaGemmSpec {
  GemmSignature signature;
  CudaGemmConfig config;
  CudaTarget target;

  // The op-tagged spec that serialises and hashes it.
  KernelSpec generic() const;
  nlohmann::json to_json() const { return generic().to_json(); }
  std::string canonical_json() const { return generic().canonical_json(); }
  // Parses and validates; throws InvalidArgument (malformed) or ConfigError (invalid combination).
  static CudaGemmSpec from_json(const nlohmann::json& j);
  Hash128 hash() const { return generic().hash(); }
  // A valid C symbol, e.g. gemm_f16f16f32_rcrr_tc128x128x32_w64x64_s4_ab_sm80_1a2b3c4d; it is the kernel's
  // extern "C" entry name in the generated source.
  std::string name() const;
};

}  // namespace tessera
