#include "ops/attention/attention_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "generator/core/arith.hpp"

namespace tessera {

namespace {

// Bytes of K and V rows one chunk may span when each key's row lies on its own page: the 4 KiB pages of 2 MiB fit
// any current x86 core's second-level TLB (1.5-3k entries) together with the rest of the call's working set.
constexpr std::int64_t kTlbReachBytes = std::int64_t{2} << 20;
constexpr std::int64_t kPageBytes = 4096;
// The widest O row a merge holds (head dimensions are at most 512).
constexpr std::int64_t kMaxHeadDim = 512;

// f32 → bf16, round to nearest even (NaN kept), as the kernels round their stores.
std::uint16_t to_bf16_bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

bool stacks(const AttentionCall& c, int block_q) {
  return stacks_query_heads(c.heads, c.kv_heads, c.longest_q(), block_q);
}

// Blocks (kernel calls before any key split) of batch item b: query heads × query blocks, or its KV heads stacked.
std::int64_t blocks_of_item(const AttentionCall& c, std::int64_t b, int block_q, bool stacked) {
  return stacked ? c.kv_heads * (c.q_len(b) > 0) : c.heads * ceil_div(c.q_len(b), block_q);
}

// Whether some head's keys are read by several query blocks (or query heads): then they are packed once, before.
bool packs_keys_first(const AttentionCall& c, const AttentionBlocking& k) {
  if (k.in_place) return false;
  const bool stacked = stacks(c, k.block_q);
  for (std::int64_t b = 0; b < c.batch; ++b)
    if ((c.q_len(b) > k.block_q || (c.heads > c.kv_heads && !stacked)) && c.q_len(b) > 0 && c.kv_len(b) > 0)
      return true;
  return false;
}

// Floats of every head's packed keys: heads (b, g) in order, ceil(kv_len(b) / block_kv) blocks each.
std::int64_t packed_floats(const AttentionCall& c, const AttentionBlocking& k) {
  std::int64_t total = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) total += c.kv_heads * ceil_div(c.kv_len(b), k.block_kv);
  return total * k.packed_block_floats;
}

// The item whose range [before[b], before[b + 1]) holds t.
std::int64_t item_of(const std::int64_t* before, std::int64_t items, std::int64_t t) {
  return static_cast<std::int64_t>(std::upper_bound(before, before + items + 1, t) - before) - 1;
}

// The buffers of one call, released together.
struct Buffers {
  const AttentionExecutor& executor;
  void* held[8] = {};
  int count = 0;
  bool failed = false;
  template <class T>
  T* take(std::int64_t elements) {
    if (failed || count == 8) return failed = true, nullptr;
    void* p = executor.allocate(executor.self, std::max<std::int64_t>(1, elements) * std::int64_t{sizeof(T)});
    if (!p) return failed = true, nullptr;
    held[count++] = p;
    return static_cast<T*>(p);
  }
  ~Buffers() {
    for (int i = 0; i < count; ++i) executor.release(executor.self, held[i]);
  }
};

struct Run {
  const AttentionCall* call;
  const AttentionBlocking* blocking;
  const AttentionKernels* kernels;
  bool stacked;
  const std::int64_t* blocks_before;  // per batch item: the blocks before it
  // Packed keys (or null): head (b, g) at packed + head_at[b·kv_heads + g]; pack task t of head h is
  // t − pack_before[h].
  float* packed;
  const std::int64_t* head_at;
  const std::int64_t* pack_before;
  // Split keys: chunk_keys keys a chunk; batch item b's chunk c of block k is task split_before[b] + c·blocks(b) + k.
  std::int64_t chunk_keys;
  const std::int64_t* split_before;
  float* o_parts;
  float* lse_parts;

  std::int64_t blocks_of(std::int64_t b) const { return blocks_before[b + 1] - blocks_before[b]; }
  std::int64_t chunks(std::int64_t b) const { return std::max<std::int64_t>(1, ceil_div(call->kv_len(b), chunk_keys)); }

  // The call for block k of batch item b (its blocks in order: query heads and blocks, or stacked KV heads).
  AttentionBlockArgs block(std::int64_t b, std::int64_t k) const {
    const AttentionCall& c = *call;
    AttentionBlockArgs a;
    if (stacked) {
      a = stacked_block_args(c, b, k);
    } else {
      const std::int64_t blocks = ceil_div(c.q_len(b), blocking->block_q);
      const std::int64_t h = k / blocks;
      a = block_args(c, b, h, k % blocks, blocking->block_q);
      if (packed) a.kv_packed = packed + head_at[b * c.kv_heads + h / (c.heads / c.kv_heads)];
    }
    if (kernels->narrow) kernels->narrow(kernels->narrow_context, a);
    return a;
  }
};

void pack_task(const void* context, std::int64_t t, void*) {
  const Run& r = *static_cast<const Run*>(context);
  const AttentionCall& c = *r.call;
  const std::int64_t head = item_of(r.pack_before, c.batch * c.kv_heads, t);
  const std::int64_t b = head / c.kv_heads, g = head % c.kv_heads;
  // The K and V of KV head g: those of its first query head.
  const AttentionBlockArgs a = block_args(c, b, g * (c.heads / c.kv_heads), 0, r.blocking->block_q);
  const std::int64_t block = t - r.pack_before[head];
  r.kernels->pack(&a, block, r.packed + r.head_at[head] + block * r.blocking->packed_block_floats);
}

void block_task(const void* context, std::int64_t t, void* scratch) {
  const Run& r = *static_cast<const Run*>(context);
  const std::int64_t b = item_of(r.blocks_before, r.call->batch, t);
  const AttentionBlockArgs a = r.block(b, t - r.blocks_before[b]);
  r.kernels->run(&a, scratch);
}

void chunk_task(const void* context, std::int64_t t, void* scratch) {
  const Run& r = *static_cast<const Run*>(context);
  const std::int64_t b = item_of(r.split_before, r.call->batch, t);
  const std::int64_t within = t - r.split_before[b];
  const std::int64_t chunk = within / r.blocks_of(b);
  AttentionBlockArgs a = r.block(b, within % r.blocks_of(b));
  a.kv_begin = std::max(a.kv_begin, chunk * r.chunk_keys);
  a.kv_stop = std::max(a.kv_begin, std::min(a.kv_stop, (chunk + 1) * r.chunk_keys));
  const std::int64_t rows = r.blocking->block_q, dv = r.call->head_dim_v;
  aim_at_chunk_scratch(a, r.o_parts + t * rows * dv, r.lse_parts + t * rows, dv);
  r.kernels->run(&a, scratch);
}

void merge_task(const void* context, std::int64_t t, void*) {
  const Run& r = *static_cast<const Run*>(context);
  const std::int64_t b = item_of(r.blocks_before, r.call->batch, t);
  const std::int64_t k = t - r.blocks_before[b];
  const std::int64_t first = r.split_before[b] + k;  // chunk 0's task
  const std::int64_t rows = r.blocking->block_q, dv = r.call->head_dim_v;
  merge_key_chunks(r.block(b, k), r.chunks(b), r.o_parts + first * rows * dv, r.blocks_of(b) * rows * dv,
                   r.lse_parts + first * rows, r.blocks_of(b) * rows, dv, r.call->o_bf16);
}

}  // namespace

std::int64_t AttentionCall::longest_q() const {
  std::int64_t longest = 0;
  for (std::int64_t b = 0; b < batch; ++b) longest = std::max(longest, q_len(b));
  return longest;
}

AttentionBlockArgs block_args(const AttentionCall& c, std::int64_t b, std::int64_t h, std::int64_t block, int block_q) {
  const std::int64_t kv_head = h / (c.heads / c.kv_heads);
  const std::int64_t first = block * block_q;
  const std::int64_t q_row = c.q_start(b) + first, kv_row = c.kv_start(b);
  AttentionBlockArgs a;
  a.q = c.q.at(b * c.q.batch + h * c.q.head + q_row * c.q.seq);
  a.q_rs = c.q.seq, a.q_ds = c.q.dim;
  a.k = c.k.at(b * c.k.batch + kv_head * c.k.head + kv_row * c.k.seq);
  a.k_rs = c.k.seq, a.k_ds = c.k.dim;
  a.v = c.v.at(b * c.v.batch + kv_head * c.v.head + kv_row * c.v.seq);
  a.v_rs = c.v.seq, a.v_ds = c.v.dim;
  a.o = const_cast<void*>(c.o.at(b * c.o.batch + h * c.o.head + q_row * c.o.seq));
  a.o_rs = c.o.seq, a.o_ds = c.o.dim;
  if (c.lse) {
    a.lse = c.lse + b * c.lse_batch + h * c.lse_head + q_row * c.lse_seq;
    a.lse_rs = c.lse_seq;
  }
  a.seq_q = c.q_len(b);
  a.seq_kv = c.kv_len(b);
  a.rows = std::min<std::int64_t>(block_q, a.seq_q - first);
  a.i0 = first;
  a.batch_index = b;
  a.head = h;
  a.tensors = c.tensors;
  a.scalars = c.scalars;
  a.scale = c.scale;
  return a;
}

AttentionBlockArgs stacked_block_args(const AttentionCall& c, std::int64_t b, std::int64_t g) {
  const std::int64_t group = c.heads / c.kv_heads;
  const std::int64_t positions = c.q_len(b);
  AttentionBlockArgs a = block_args(c, b, g * group, 0, static_cast<int>(positions));
  a.rows = group * positions;
  a.positions = positions;
  a.q_hs = c.q.head, a.o_hs = c.o.head, a.lse_hs = c.lse_head;
  return a;
}

std::int64_t key_chunk_length(const AttentionCall& c, const AttentionBlocking& k, std::int64_t blocks, int threads) {
  if (blocks <= 0) return 0;
  std::int64_t longest = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) longest = std::max(longest, c.kv_len(b));
  std::int64_t chunk = longest;
  if (blocks < 2 * std::int64_t{threads}) chunk = ceil_div(longest, ceil_div(2 * std::int64_t{threads}, blocks));
  const std::int64_t row_bytes = std::max(c.k.seq * c.k.element_bytes, c.v.seq * c.v.element_bytes);
  if (k.in_place && row_bytes >= kPageBytes) chunk = std::min(chunk, kTlbReachBytes / (2 * row_bytes));
  chunk = round_up(std::max<std::int64_t>(chunk, 1), k.block_kv);
  return chunk >= longest ? 0 : chunk;
}

void aim_at_chunk_scratch(AttentionBlockArgs& call, float* o_part, float* lse_part, std::int64_t dv) {
  // Row r at r·dv: (r % positions)·o_rs + (r / positions)·o_hs with o_rs = dv and o_hs = positions·dv.
  const std::int64_t positions = std::min(call.positions, call.rows);
  call.o = o_part, call.o_rs = dv, call.o_ds = 1, call.o_hs = positions * dv, call.o_f32 = 1;
  call.lse = lse_part, call.lse_rs = 1, call.lse_hs = positions;
}

void merge_key_chunks(const AttentionBlockArgs& call, std::int64_t chunks, const float* o_parts,
                      std::int64_t o_chunk_floats, const float* lse_parts, std::int64_t lse_chunk_floats,
                      std::int64_t dv, bool o_bf16) {
  float row[kMaxHeadDim];
  // O's element `at` = x, rounded as the kernel rounds its own stores.
  const auto store = [&](std::int64_t at, float x) {
    if (o_bf16)
      static_cast<std::uint16_t*>(call.o)[at] = to_bf16_bits(x);
    else
      static_cast<float*>(call.o)[at] = x;
  };
  for (std::int64_t r = 0; r < call.rows; ++r) {
    float top = -INFINITY;
    for (std::int64_t c = 0; c < chunks; ++c) top = std::max(top, lse_parts[c * lse_chunk_floats + r]);
    const std::int64_t at = (r % call.positions) * call.o_rs + (r / call.positions) * call.o_hs;
    if (std::isinf(top)) {  // no chunk saw a key of this row: zeros, as the unsplit kernel writes
      for (std::int64_t d = 0; d < dv; ++d) store(at + d * call.o_ds, 0);
      if (call.lse) call.lse[(r % call.positions) * call.lse_rs + (r / call.positions) * call.lse_hs] = top;
      continue;
    }
    float total = 0;
    for (std::int64_t c = 0; c < chunks; ++c) total += std::exp(lse_parts[c * lse_chunk_floats + r] - top);
    std::fill(row, row + dv, 0.0f);
    for (std::int64_t c = 0; c < chunks; ++c) {
      const float w = std::exp(lse_parts[c * lse_chunk_floats + r] - top) / total;
      const float* part = o_parts + c * o_chunk_floats + r * dv;
      if (w != 0)
        for (std::int64_t d = 0; d < dv; ++d) row[d] += w * part[d];
    }
    for (std::int64_t d = 0; d < dv; ++d) store(at + d * call.o_ds, row[d]);
    if (call.lse)
      call.lse[(r % call.positions) * call.lse_rs + (r / call.positions) * call.lse_hs] = top + std::log(total);
  }
}

std::int64_t attention_buffer_bytes(const AttentionCall& c, const AttentionBlocking& k, int threads) {
  std::int64_t bytes = 0;
  if (packs_keys_first(c, k)) bytes += 4 * packed_floats(c, k);
  // Split keys: each chunk's output and LSE rows.
  const bool stacked = stacks(c, k.block_q);
  std::int64_t tasks = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) tasks += blocks_of_item(c, b, k.block_q, stacked);
  const std::int64_t chunk = key_chunk_length(c, k, tasks, std::max(1, threads));
  if (chunk > 0)
    for (std::int64_t b = 0; b < c.batch; ++b)
      bytes += 4 * blocks_of_item(c, b, k.block_q, stacked) * std::max<std::int64_t>(1, ceil_div(c.kv_len(b), chunk)) *
               k.block_q * (c.head_dim_v + 1);
  return bytes;
}

int run_attention(const AttentionCall& c, const AttentionBlocking& k, const AttentionKernels& kernels,
                  const AttentionExecutor& executor) {
  Buffers buffers{executor};
  Run r{};
  r.call = &c;
  r.blocking = &k;
  r.kernels = &kernels;
  r.stacked = stacks(c, k.block_q);
  // Tasks are (batch item, head, query block), batch items in order; blocks_before[b] counts the tasks before b.
  // Stacked (grouped-query decoding): (batch item, KV head), the group's query heads the rows of one block.
  std::int64_t* blocks_before = buffers.take<std::int64_t>(c.batch + 1);
  if (!blocks_before) return 1;
  blocks_before[0] = 0;
  for (std::int64_t b = 0; b < c.batch; ++b)
    blocks_before[b + 1] = blocks_before[b] + blocks_of_item(c, b, k.block_q, r.stacked);
  r.blocks_before = blocks_before;
  const std::int64_t tasks = blocks_before[c.batch];
  if (tasks == 0) return 0;

  // Keys read by several query blocks (or heads) are packed once, in parallel, instead of once per block.
  const std::int64_t heads = c.batch * c.kv_heads;
  if (packs_keys_first(c, k)) {
    r.packed = buffers.take<float>(packed_floats(c, k));
    std::int64_t* head_at = buffers.take<std::int64_t>(heads + 1);
    std::int64_t* pack_before = buffers.take<std::int64_t>(heads + 1);
    if (buffers.failed) return 1;
    head_at[0] = pack_before[0] = 0;
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t blocks = ceil_div(c.kv_len(h / c.kv_heads), k.block_kv);
      head_at[h + 1] = head_at[h] + blocks * k.packed_block_floats;
      pack_before[h + 1] = pack_before[h] + blocks;
    }
    r.head_at = head_at;
    r.pack_before = pack_before;
  }

  r.chunk_keys = key_chunk_length(c, k, tasks, executor.threads);
  if (r.chunk_keys > 0) {
    std::int64_t* split_before = buffers.take<std::int64_t>(c.batch + 1);
    if (!split_before) return 1;
    split_before[0] = 0;
    for (std::int64_t b = 0; b < c.batch; ++b) split_before[b + 1] = split_before[b] + r.blocks_of(b) * r.chunks(b);
    r.split_before = split_before;
    r.o_parts = buffers.take<float>(split_before[c.batch] * k.block_q * c.head_dim_v);
    r.lse_parts = buffers.take<float>(split_before[c.batch] * k.block_q);
    if (buffers.failed) return 1;
  }

  if (r.packed) executor.run(executor.self, r.pack_before[heads], 0, pack_task, &r);
  if (r.chunk_keys == 0) {
    executor.run(executor.self, tasks, k.workspace_bytes, block_task, &r);
    return 0;
  }
  // Split keys: a chunk's blocks together, so that interleaved heads share the chunk's pages; merged per block after.
  executor.run(executor.self, r.split_before[c.batch], k.workspace_bytes, chunk_task, &r);
  executor.run(executor.self, tasks, 0, merge_task, &r);
  return 0;
}

}  // namespace tessera
