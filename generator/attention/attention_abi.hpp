// The calling convention between the runtime and a generated CPU attention kernel; the emitter mirrors these structs.
// The runtime resolves batch item, head (and its KV head), sequence offsets and strides, so one call of the kernel
// computes one block of query rows of one head against that head's keys.
#pragma once

#include <cstdint>

namespace tessera {

// Query positions per sequence up to which grouped-query attention stacks a KV head's query heads in one block
// (decoding, speculative decoding): the group then reads its keys once, not once per query head.
constexpr std::int64_t kStackedPositions = 8;

// Whether blocks of `block_q` rows stack a KV head's query heads (AttentionBlockArgs::positions): grouped-query
// attention whose longest query sequence has at most kStackedPositions positions, a group's queries filling at most
// one block.
inline bool stacks_query_heads(std::int64_t heads, std::int64_t kv_heads, std::int64_t longest_q, int block_q) {
  return kv_heads > 0 && heads != kv_heads && longest_q <= kStackedPositions && heads / kv_heads * longest_q <= block_q;
}

// A tensor the score modifier reads: element [x0, x1, ...] at Σ xk·strides[k] (up to rank 4).
struct ModifierTensorArg {
  const float* data = nullptr;
  std::int64_t strides[4] = {0, 0, 0, 0};
};

struct AttentionBlockArgs {
  // Row r (query or key) and head-dimension element d at r·rs + d·ds; q and o start at the block's first row.
  const void* q = nullptr;
  std::int64_t q_rs = 0, q_ds = 0;
  const void* k = nullptr;
  std::int64_t k_rs = 0, k_ds = 0;
  const void* v = nullptr;
  std::int64_t v_rs = 0, v_ds = 0;
  void* o = nullptr;
  std::int64_t o_rs = 0, o_ds = 0;
  float* lse = nullptr;  // row r at lse[r·lse_rs] (see positions); written when not null
  std::int64_t lse_rs = 0;
  std::int64_t rows = 0;   // query rows of this block, 1 … block_q
  std::int64_t seq_q = 0;  // query and key lengths of this sequence
  std::int64_t seq_kv = 0;
  std::int64_t i0 = 0;  // position of the block's first row in its sequence
  std::int64_t batch_index = 0, head = 0;
  // Row r of the block is query position i0 + r % positions of head head + r / positions, its Q row at
  // q + (r % positions)·q_rs + (r / positions)·q_hs (O and LSE alike): positions ≥ rows for a block of one head's
  // queries; grouped-query decoding stacks a KV head's query heads, `positions` rows each, so its keys are read once.
  std::int64_t positions = INT64_MAX;
  std::int64_t q_hs = 0, o_hs = 0, lse_hs = 0;
  // Keys [kv_begin, kv_stop) may be visible to some row (kv_begin a multiple of block_kv): blocks outside it are
  // masked for every row by the score modifier (a sliding window) and are skipped.
  std::int64_t kv_begin = 0, kv_stop = INT64_MAX;
  // K and V of this head packed by the pack entry, block after block (CpuAttentionConfig::packed_block_floats
  // each); null: the kernel packs each block into its workspace as it goes.
  const float* kv_packed = nullptr;
  const ModifierTensorArg* tensors = nullptr;  // the score modifier's tensors, in ScoreModifier::tensors() order
  const float* scalars = nullptr;              // its scalars, in ScoreModifier::scalars() order
  float scale = 1;
  // 1: O written as unit-stride f32 rows whatever the signature's type (a split call's partial output).
  std::int32_t o_f32 = 0;
};

// Computes the block with `workspace` (CpuAttentionConfig::workspace_bytes, 64-byte aligned) as scratch.
using AttentionKernelFn = void (*)(const AttentionBlockArgs* args, void* workspace);
// The module's second entry, "<name>_pack": packs key block `block` (keys [block·block_kv, ...)) of the head that
// args' k and v point to into dst, as the kernel reads it; only k, v, their strides and seq_kv are read.
using AttentionPackFn = void (*)(const AttentionBlockArgs* args, std::int64_t block, float* dst);

}  // namespace tessera
