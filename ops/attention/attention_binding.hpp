// Attention arguments checked and resolved into what the kernel's calls need: the problem, per batch item where its
// rows start in each tensor, the strides of every view, and the score modifier's tensors and scalars in kernel order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "generator/attention/attention_abi.hpp"
#include "ops/attention/attention_schedule.hpp"
#include "tessera/attention.hpp"

namespace tessera {

struct AttentionBinding {
  AttentionProblem problem;
  float scale = 1;
  AttentionView q, k, v, o;
  float* lse = nullptr;
  std::int64_t lse_batch = 0, lse_head = 0, lse_seq = 0;
  std::vector<std::int64_t> offsets_q, offsets_kv;  // varlen: batch + 1 cumulative row offsets; else empty
  std::vector<ModifierTensorArg> tensors;           // in ScoreModifier::tensors() order
  std::vector<float> scalars;                       // in ScoreModifier::scalars() order

  // The call as the CPU schedule takes it (pointing into this binding).
  AttentionCall call() const;
};

// Throws InvalidArgument naming the argument and the rule it breaks.
AttentionBinding bind_attention(const AttentionArgs& args);

// What the CPU schedule needs of a kernel's config (its blocks, packed key block and scratch sizes).
AttentionBlocking blocking_of(const CpuAttentionSpec& spec);
// Narrows a call's keys to [kv_begin, kv_stop): key blocks (of block_kv) where the score modifier is provably −inf
// for every row of the call — a `cond ? -inf : ...` whose condition holds over the block's positions, as in a sliding
// window `j < i - 256 ? -inf : s` — are left out at either end.
void skip_masked_key_blocks(AttentionBlockArgs& call, const ScoreModifier& mod, int block_kv);

}  // namespace tessera
