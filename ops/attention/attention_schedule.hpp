// How a CPU attention call runs: its kernel calls as tasks (batch item, head, query block; or a KV head's query heads
// stacked for decoding), the keys packed once where several blocks read them, and decoding's keys split into chunks
// merged by their log-sum-exp (flash-decoding). Shared by the runtime (AttentionKernel::run) and kernel libraries,
// whose driver compiles this very file (with TESSERA_ATTENTION_SCHEDULE_STANDALONE): plain data in, buffers from
// the caller's executor, no exceptions, nothing from the C++ runtime library.
#pragma once

#include <cstddef>
#include <cstdint>

#include "generator/attention/attention_abi.hpp"

namespace tessera {

// A [batch, heads, seq, dim] view's strides in elements (varlen views have batch stride 0: rows start at offsets).
struct AttentionView {
  const std::byte* data = nullptr;
  std::int64_t batch = 0, head = 0, seq = 0, dim = 0;
  std::int64_t element_bytes = 4;
  // The address of element offset `elements`.
  const void* at(std::int64_t elements) const { return data + elements * element_bytes; }
};

// A checked attention call as plain data.
struct AttentionCall {
  std::int64_t batch = 0, heads = 0, kv_heads = 0;
  std::int64_t seq_q = 0, seq_kv = 0;  // every batch item's lengths, unless offsets are given
  // Variable lengths: batch + 1 cumulative row offsets into the sequence dimension of Q and O, and of K and V.
  const std::int64_t* offsets_q = nullptr;
  const std::int64_t* offsets_kv = nullptr;
  std::int64_t head_dim_v = 0;
  bool o_bf16 = false;  // O's element type (else f32)
  AttentionView q, k, v, o;
  float* lse = nullptr;  // optional; the row of head h, position i of batch item b at the strides below
  std::int64_t lse_batch = 0, lse_head = 0, lse_seq = 0;
  const ModifierTensorArg* tensors = nullptr;  // the score modifier's, in its order
  const float* scalars = nullptr;
  float scale = 1;

  std::int64_t q_len(std::int64_t b) const { return offsets_q ? offsets_q[b + 1] - offsets_q[b] : seq_q; }
  std::int64_t kv_len(std::int64_t b) const { return offsets_kv ? offsets_kv[b + 1] - offsets_kv[b] : seq_kv; }
  std::int64_t q_start(std::int64_t b) const { return offsets_q ? offsets_q[b] : 0; }
  std::int64_t kv_start(std::int64_t b) const { return offsets_kv ? offsets_kv[b] : 0; }
  std::int64_t longest_q() const;
};

// What of a kernel's config and target the schedule needs (CpuAttentionConfig's blocks and sizes).
struct AttentionBlocking {
  int block_q = 0, block_kv = 0;
  bool in_place = false;                 // keys read where they lie (decoding); their chunks may split
  std::int64_t packed_block_floats = 0;  // floats of one packed key block
  std::int64_t workspace_bytes = 0;      // the kernel's scratch per thread
};

// Where the tasks run and the buffers come from: the runtime's pool and allocator, or a library's.
struct AttentionExecutor {
  using Task = void (*)(const void* context, std::int64_t task, void* scratch);
  void* self = nullptr;
  int threads = 1;
  // Runs task(context, t, scratch) for t < count on up to `threads` threads, each with `scratch_bytes` of 64-byte
  // aligned scratch of its own.
  void (*run)(void* self, std::int64_t count, std::int64_t scratch_bytes, Task task, const void* context) = nullptr;
  // 64-byte aligned; null when out of memory.
  void* (*allocate)(void* self, std::int64_t bytes) = nullptr;
  void (*release)(void* self, void* buffer) = nullptr;
};

struct AttentionKernels {
  AttentionKernelFn run = nullptr;
  AttentionPackFn pack = nullptr;
  // Narrows a block's keys to those some row may see (a sliding window's; the runtime proves it from the score
  // modifier's text); null: every key is offered, and the kernel masks.
  void (*narrow)(const void* context, AttentionBlockArgs& call) = nullptr;
  const void* narrow_context = nullptr;
};

// The kernel call for query block `block` of head h of batch item b (rows [block·block_q, ...)).
AttentionBlockArgs block_args(const AttentionCall& call, std::int64_t b, std::int64_t h, std::int64_t block,
                              int block_q);
// Grouped-query decoding: the call for all query heads of KV head g of batch item b, each head's queries a run of
// rows of one block, so that the group reads its keys once.
AttentionBlockArgs stacked_block_args(const AttentionCall& call, std::int64_t b, std::int64_t g);

// Keys per chunk (a multiple of block_kv), or 0 for no split: calls of fewer blocks than two a thread (decoding, one
// stacked block of multi-query attention) split into enough chunks to give `threads` threads two tasks each, and
// in-place reads into chunks whose K and V rows stay within the TLB's reach when a key's row is a page or more away
// from the next (heads interleaved).
std::int64_t key_chunk_length(const AttentionCall& call, const AttentionBlocking& blocking, std::int64_t blocks,
                              int threads);
// Points a block's call at its chunk's scratch: O rows of `dv` floats (f32 whatever the signature's type) from
// o_part, the LSE at lse_part, one per row.
void aim_at_chunk_scratch(AttentionBlockArgs& call, float* o_part, float* lse_part, std::int64_t dv);
// Merges `chunks` partial results of one block (chunk c's rows at o_parts + c·o_chunk_floats and lse_parts +
// c·lse_chunk_floats, as aim_at_chunk_scratch lays them out) into the block's O (bf16 or f32) and LSE as `call`
// addresses them.
void merge_key_chunks(const AttentionBlockArgs& call, std::int64_t chunks, const float* o_parts,
                      std::int64_t o_chunk_floats, const float* lse_parts, std::int64_t lse_chunk_floats,
                      std::int64_t dv, bool o_bf16);

// Bytes of the buffers run_attention allocates on `threads` threads, at most (packed keys, split chunks' outputs),
// beside the threads' scratch.
std::int64_t attention_buffer_bytes(const AttentionCall& call, const AttentionBlocking& blocking, int threads);

// Runs the call. 0, or 1 when a buffer could not be allocated (then nothing was written).
int run_attention(const AttentionCall& call, const AttentionBlocking& blocking, const AttentionKernels& kernels,
                  const AttentionExecutor& executor);

}  // namespace tessera
