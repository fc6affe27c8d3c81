// A CUDA attention kernel: {attention signature, CUDA config, CUDA target}; its KernelSpec is op "attention" on a
// CUDA target. The config picks the FlashAttention-2 kernel's key block and warps (templates/tessera/attention).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "generator/attention/attention_problem.hpp"
#include "generator/core/cuda_target.hpp"
#include "generator/core/kernel_spec.hpp"

namespace tessera {

struct CudaAttentionConfig {
  int block_kv = 64;  // keys per block in shared memory (a multiple of 16)
  int warps = 4;      // each owns 16 query rows
  int align = 8;      // elements the rows of Q, K and V are aligned to (8: 16-byte cp.async)

  int block_q() const { return 16 * warps; }
  int threads() const { return 32 * warps; }
  // Q, then K and V of two stages, 16-bit elements.
  int shared_bytes(const AttentionSignature& s) const {
    return static_cast<int>((block_q() + 4 * block_kv) * s.head_dim_qk * 2);
  }
  // 64 keys per block up to d = 64, 32 above (d = 128 with 64 keys spilled on sm_90).
  static CudaAttentionConfig default_for(const AttentionProblem& problem, const CudaTarget& target);
  nlohmann::json to_json() const;
  friend bool operator==(const CudaAttentionConfig&, const CudaAttentionConfig&) = default;
};

// Throws ConfigError stating the rule broken: f16 or bf16; head dims 32, 64, 96 or 128, equal for QK and V; unit
// head-dimension strides; score modifiers of at most 4 tensors and 8 scalars; shared memory within the target's.
void validate(const AttentionSignature& signature, const CudaAttentionConfig& config, const CudaTarget& target);

struct CudaAttentionSpec {
  AttentionSignature signature;
  CudaAttentionConfig config;
  CudaTarget target;

  KernelSpec generic() const;
  Hash128 hash() const { return generic().hash(); }
  // A valid C symbol, e.g. flash_attention_f16_d128_causal_bc32_w4_a8_sm80_1a2b3c4d.
  std::string name() const;
};

}  // namespace tessera
