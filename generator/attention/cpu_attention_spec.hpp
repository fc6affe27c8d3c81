// CpuAttentionSpec: a CPU attention kernel, {attention signature, CPU config, CPU target}; its KernelSpec is op
// "attention".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "generator/attention/attention_problem.hpp"
#include "generator/attention/cpu_attention_config.hpp"
#include "generator/core/cpu_target.hpp"
#include "generator/core/kernel_spec.hpp"

namespace tessera {

struct CpuAttentionSpec {
  AttentionSignature signature;
  CpuAttentionConfig config;
  CpuTarget target;

  KernelSpec generic() const;
  nlohmann::json to_json() const { return generic().to_json(); }
  std::string canonical_json() const { return generic().canonical_json(); }
  // Parses and validates; throws InvalidArgument (malformed) or ConfigError (invalid combination).
  static CpuAttentionSpec from_json(const nlohmann::json& j);
  Hash128 hash() const { return generic().hash(); }
  // A valid C symbol, e.g. attention_f32_d128_causal_48x128_6x4_avx512_1a2b3c4d.
  std::string name() const;
};

}  // namespace tessera
