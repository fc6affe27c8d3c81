// CpuGemmSpec: a CPU GEMM kernel, {GEMM signature, CPU config, CPU target}; its KernelSpec is op "gemm".
#pragma once

#include <string>
#include <string_view>

#include "generator/core/cpu_target.hpp"
#include "generator/core/hash.hpp"
#include "generator/gemm/cpu_gemm_config.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

struct KernelSpec;  // generator/core/kernel_spec.hpp

struct CpuGemmSpec {
  GemmSignature signature;
  CpuGemmConfig config;
  CpuTarget target;

  // The op-tagged spec that serialises and hashes it.
  KernelSpec generic() const;
  std::string canonical_json() const;
  // XXH3-128 of the canonical JSON.
  Hash128 hash() const;
  // A procedural name that is a valid C symbol, e.g. gemm_f32_rrzr_8x32x192_ab_avx512_1a2b3c4d.
  std::string name() const;
  // The instruction-set extension the kernel's multiplies need beyond its ISA, as LLVM names it ("" for none):
  // avx512bf16 (vdpbf16ps), avx512vnni or avxvnni (vpdpbusd at 512 or 256 bits).
  std::string_view required_extension() const;
};

}  // namespace tessera
