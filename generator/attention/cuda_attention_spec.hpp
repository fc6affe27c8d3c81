// A CUDA attention kernel: {attention signature, CUDA config, CUDA target}; its KernelSpec is op "attention" on a
// CUDA target. The config picks the kernel (FlashAttention-2's on mma.sync, or on sm_90a FlashAttention-3's on TMA and
// wgmma), its key block and warps (templates/tessera/attention).
#pragma once

#include <string>

#include "generator/attention/attention_problem.hpp"
#include "generator/core/cuda_target.hpp"
#include "generator/core/hash.hpp"

namespace tessera {

struct KernelSpec;  // generator/core/kernel_spec.hpp

struct CudaAttentionConfig {
  int block_kv = 64;  // keys per block in shared memory (a multiple of 16)
  int warps = 4;      // each owns 16 query rows
  int align = 8;      // elements the rows of Q, K and V are aligned to (8: 16-byte cp.async)
  // Copies of each query block over disjoint key ranges, merged afterwards (flash-decoding): 0 chooses by the grid's
  // fill of the target's SMs. A launch choice, not code: the spec's hash leaves it out.
  int kv_splits = 0;
  // The Hopper kernel (sm_90a; flash_forward_wgmma.cuh): `warps` are then its consumer warps (4 or 8: one or two
  // warpgroups of 64 rows) beside a producer warpgroup, K and V pass through `stages` TMA stages; no key splits.
  bool wgmma = false;
  int stages = 2;

  int block_q() const { return 16 * warps; }
  int threads() const { return 32 * warps + (wgmma ? 128 : 0); }
  // Q, then K and V of two stages (of `stages` and the mbarriers for wgmma), 16-bit elements.
  int shared_bytes(const AttentionSignature& s) const {
    if (wgmma) return static_cast<int>((block_q() + 2 * stages * block_kv) * s.head_dim_qk * 2 + 8 * (1 + 3 * stages));
    return static_cast<int>((block_q() + 4 * block_kv) * s.head_dim_qk * 2);
  }
  // mma.sync: 64 keys per block up to d = 64, 32 above (d = 128 with 64 keys spilled on sm_90). sm_90a, d = 64 or
  // 128, where the query blocks need no key splits: the wgmma kernel with FlashAttention-3's 128 x 128 tiles (two
  // consumer warpgroups, 232 registers each after the producer's hand-over).
  static CudaAttentionConfig default_for(const AttentionProblem& problem, const CudaTarget& target);
  // The mma.sync kernel's default (what a call the wgmma kernel cannot take runs instead).
  static CudaAttentionConfig mma_sync_default(const AttentionProblem& problem);
  // "block_kv=128,warps=8,wgmma=1,stages=3" applied to this config; throws InvalidArgument for an unknown key.
  CudaAttentionConfig with_overrides(const std::string& text) const;
  // The key splits a launch of `problem` runs: kv_splits when given (at most one per key block), else 1 when the
  // query blocks fill the SMs, else the fewest splits, each of at least kMinSplitBlocks key blocks, whose waves are
  // within 85% of the best fill (FlashAttention's heuristic).
  int key_splits(const AttentionProblem& problem, const CudaTarget& target) const;
  // Keys per split for `splits` (a multiple of block_kv).
  std::int64_t split_keys(const AttentionProblem& problem, int splits) const;
  friend bool operator==(const CudaAttentionConfig&, const CudaAttentionConfig&) = default;
};

// Throws ConfigError stating the rule broken: f16 or bf16; head dims 32, 64, 96 or 128, equal for QK and V; unit
// head-dimension strides; score modifiers of at most 4 tensors and 8 scalars; shared memory within the target's;
// wgmma only on sm_90a with d = 64 or 128, 4 or 8 warps, 64 or 128 keys, 2-4 stages and no key splits.
void validate(const AttentionSignature& signature, const CudaAttentionConfig& config, const CudaTarget& target);

struct CudaAttentionSpec {
  AttentionSignature signature;
  CudaAttentionConfig config;
  CudaTarget target;

  KernelSpec generic() const;
  Hash128 hash() const;
  // A valid C symbol, e.g. flash_attention_f16_d128_causal_bc32_w4_a8_sm80_1a2b3c4d.
  std::string name() const;
  // The entry that merges split keys' partial rows: name() + "_combine".
  std::string combine_name() const { return name() + "_combine"; }
};

}  // namespace tessera
