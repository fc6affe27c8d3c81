// CpuSpmmSpec and CpuSddmmSpec: {signature, CPU config, CPU target}; their KernelSpecs are ops "spmm" and "sddmm".
#pragma once

#include <string>

#include "generator/core/cpu_target.hpp"
#include "generator/core/hash.hpp"
#include "generator/sparse/cpu_sparse_config.hpp"
#include "generator/sparse/sparse_problem.hpp"

namespace tessera {

struct KernelSpec;  // generator/core/kernel_spec.hpp

struct CpuSpmmSpec {
  SpmmSignature signature;
  CpuSpmmConfig config;
  CpuTarget target;

  KernelSpec generic() const;
  Hash128 hash() const;
  // A valid C symbol, e.g. spmm_csr_i32_f32_nv4x2_avx512_1a2b3c4d.
  std::string name() const;
};

struct CpuSddmmSpec {
  SddmmSignature signature;
  CpuSddmmConfig config;
  CpuTarget target;

  KernelSpec generic() const;
  Hash128 hash() const;
  // e.g. sddmm_csr_i32_f32_c8u2_avx512_1a2b3c4d.
  std::string name() const;
};

}  // namespace tessera
