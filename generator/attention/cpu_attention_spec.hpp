// CpuAttentionSpec: a CPU attention kernel, {attention signature, CPU config, CPU target}; its KernelSpec is op
// "attention".
#pragma once

#include <string>

#include "generator/attention/attention_problem.hpp"
#include "generator/attention/cpu_attention_config.hpp"
#include "generator/core/cpu_target.hpp"
#include "generator/core/hash.hpp"

namespace tessera {

struct KernelSpec;  // generator/core/kernel_spec.hpp

struct CpuAttentionSpec {
  AttentionSignature signature;
  CpuAttentionConfig config;
  CpuTarget target;

  KernelSpec generic() const;
  std::string canonical_json() const;
  Hash128 hash() const;
  // A valid C symbol, e.g. attention_f32_d128_causal_48x128_6x4_avx512_1a2b3c4d.
  std::string name() const;
};

}  // namespace tessera
