// CpuSpmmSpec and CpuSddmmSpec: {signature, CPU config, CPU target}; their KernelSpecs are ops "spmm" and "sddmm".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "generator/core/cpu_target.hpp"
#include "generator/core/kernel_spec.hpp"
#include "generator/sparse/cpu_sparse_config.hpp"
#include "generator/sparse/sparse_problem.hpp"

namespace tessera {

struct CpuSpmmSpec {
  SpmmSignature signature;
  CpuSpmmConfig config;
  CpuTarget target;

  KernelSpec generic() const;
  nlohmann::json to_json() const { return generic().to_json(); }
  // Parses and validates; throws InvalidArgument (malformed) or ConfigError (invalid combination).
  static CpuSpmmSpec from_json(const nlohmann::json& j);
  Hash128 hash() const { return generic().hash(); }
  // A valid C symbol, e.g. spmm_csr_i32_f32_nv4x2_avx512_1a2b3c4d.
  std::string name() const;
};

struct CpuSddmmSpec {
  SddmmSignature signature;
  CpuSddmmConfig config;
  CpuTarget target;

  KernelSpec generic() const;
  nlohmann::json to_json() const { return generic().to_json(); }
  static CpuSddmmSpec from_json(const nlohmann::json& j);
  Hash128 hash() const { return generic().hash(); }
  // e.g. sddmm_csr_i32_f32_c8u2_avx512_1a2b3c4d.
  std::string name() const;
};

}  // namespace tessera
