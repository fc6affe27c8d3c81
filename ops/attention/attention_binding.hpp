// Attention arguments checked and resolved into what the kernel's calls need: the problem, per batch item where its
// rows start in each tensor, the strides of every view, and the score modifier's tensors and scalars in kernel order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "generator/attention/attention_abi.hpp"
#include "tessera/attention.hpp"

namespace tessera {

// A [batch, heads, seq, dim] view's strides in elements (varlen views have batch stride 0: rows start at offsets).
struct AttentionView {
  const std::byte* data = nullptr;
  std::int64_t batch = 0, head = 0, seq = 0, dim = 0;
  std::int64_t element_bytes = 4;
  // The address of element offset `elements`.
  const void* at(std::int64_t elements) const { return data + elements * element_bytes; }
};

struct AttentionBinding {
  AttentionProblem problem;
  float scale = 1;
  AttentionView q, k, v, o;
  float* lse = nullptr;
  std::int64_t lse_batch = 0, lse_head = 0, lse_seq = 0;
  std::vector<std::int64_t> q_start, kv_start;  // per batch item: its first row in the sequence dimension
  std::vector<ModifierTensorArg> tensors;       // in ScoreModifier::tensors() order
  std::vector<float> scalars;                   // in ScoreModifier::scalars() order
};

// Throws InvalidArgument naming the argument and the rule it breaks.
AttentionBinding bind_attention(const AttentionArgs& args);

// The arguments of the kernel call for query block `block` of head h of batch item b (rows [block·block_q, ...)).
AttentionBlockArgs block_args(const AttentionBinding& bound, std::int64_t b, std::int64_t h, std::int64_t block,
                              int block_q);

// Grouped-query decoding (a few queries per sequence): the call for all query heads of KV head g of batch item b,
// each head's queries a run of rows of one block, so that the group reads its keys once.
AttentionBlockArgs stacked_block_args(const AttentionBinding& bound, std::int64_t b, std::int64_t g);
// Narrows a call's keys to [kv_begin, kv_stop): key blocks (of block_kv) where the score modifier is provably −inf
// for every row of the call — a `cond ? -inf : ...` whose condition holds over the block's positions, as in a sliding
// window `j < i - 256 ? -inf : s` — are left out at either end.
void skip_masked_key_blocks(AttentionBlockArgs& call, const ScoreModifier& mod, int block_kv);

}  // namespace tessera
