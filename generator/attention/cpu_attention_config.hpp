// How a CPU attention kernel is blocked: FlashAttention-2's loop with a block of query rows kept in L1 while K and V
// stream through in blocks, each product (S = Q·Kᵀ over the head dimension, O += P·V over the key block) computed
// by the same outer-product register tile as GEMM's micro-kernel (mr rows × nr = nv vectors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "generator/attention/attention_abi.hpp"
#include "generator/attention/attention_problem.hpp"
#include "generator/core/cpu_target.hpp"

namespace tessera {

struct CpuAttentionConfig {
  int block_q = 48;    // query rows per task, a multiple of mr
  int block_kv = 128;  // keys per step of the online softmax, a multiple of nr
  int mr = 6;          // register tile rows (query rows)
  int nv = 4;          // register tile vectors per row: nr = nv·lanes keys (S) or head-dim columns (O)
  // K and V read where they lie, nothing packed: S by dot products along the head dimension, O += P·V from V's
  // rows. For a few query rows per head (decoding), where every key is read once and packing would copy it.
  // Needs unit head-dimension strides.
  bool in_place = false;
  // Reads in place prefetch the key rows ahead into L2 (prefetcht1) rather than non-temporally (prefetchnta). Which
  // one keeps more lines in flight depends on the core: decoding, one thread, d 128, 32 query heads: Zen 4 ran 4096
  // keys in 9.5 ms with NTA and 6.3-7.3 into L2, 8 KV heads × 32768 keys in 29.0 and 16.8-17.6; Zen 5 the latter in
  // 11.4 with NTA and 14.9 into L2. Packed configs read their own copies and ignore it (so that `in_place=0`
  // overrides any default).
  bool prefetch_l2 = false;
  // bf16 products on AMX tiles (1; 2: the same kernel with the tile instructions' effect emulated in vector code,
  // for hosts without AMX): S = Q·Kᵀ and O += P·V as tile products of mr (16 or 32) query rows × nr keys or
  // head-dimension columns, Q packed into tiles, K and V in bf16 pairs with their reduction dimension padded to 32.
  int amx = kAmxNone;
  static constexpr int kAmxNone = 0, kAmxTiles = 1, kAmxEmulated = 2;

  int nr(const CpuTarget& target) const { return nv * target.vector_lanes(); }
  // Whether bf16 products run on vdpbf16ps: bf16 tensors with unit head-dimension strides, packed (not in place), on
  // a target with avx512_bf16. K and V are then packed in bf16 pairs and P rounded to bf16; else bf16 is widened.
  bool grouped(const AttentionSignature& s, const CpuTarget& target) const {
    return s.dtype == DType::bf16 && target.avx512_bf16 && !in_place && s.q_unit_d && s.k_unit_d && s.v_unit_d;
  }
  // The head dimension of Q and K as their packed slivers hold it: padded to 32 bf16 (a tile row) on AMX.
  std::int64_t packed_head_dim_qk(const AttentionSignature& s) const;
  // Floats of the areas that hold a packed Q block and a packed K block (bf16 pairs take half a float each).
  std::int64_t q_area_floats(const AttentionSignature& s) const;
  std::int64_t k_area_floats(const AttentionSignature& s) const;
  // Floats of one packed key block: K in slivers of nr keys, then V in slivers of nr head-dimension columns.
  std::int64_t packed_block_floats(const AttentionSignature& s, const CpuTarget& target) const;
  // Per-thread scratch: the packed Q block, K and V blocks, the score block, the O accumulator, P in bf16 (grouped),
  // three row arrays and the rows' offsets in Q.
  std::int64_t workspace_bytes(const AttentionSignature& s, const CpuTarget& target) const;

  // The config the rules pick for a problem; the variant space's first element.
  static CpuAttentionConfig default_for(const AttentionProblem& problem, const CpuTarget& target);
  // "block_q=96,block_kv=256,mr=6,nv=4" applied to this config; throws InvalidArgument for an unknown key.
  CpuAttentionConfig with_overrides(const std::string& text) const;
  friend bool operator==(const CpuAttentionConfig&, const CpuAttentionConfig&) = default;
};

// Whether blocks stack query heads: grouped-query attention with at most kStackedPositions queries per sequence, and
// a group's queries that fit a block of `block_q` rows.
bool stacks_query_heads(const AttentionProblem& p, int block_q);

// Throws ConfigError stating the rule the config breaks for this signature and target.
void validate(const AttentionSignature& signature, const CpuAttentionConfig& config, const CpuTarget& target);

// Vector registers an mr × nv register tile takes: its accumulators, a broadcast row value, and the nv vectors of the
// other operand where mr > 1 reuses them (a tile of one row takes each vector once, from memory, as an FMA operand).
int tile_vector_registers(int mr, int nv);

// Whether one KV head's keys and values (its longest sequence) outgrow twice the L2: every block then reads them from
// memory or L3, and keys packed once for several blocks leave the caches before those blocks read them.
bool keys_outgrow_l2(const AttentionProblem& problem, const CpuTarget& target);

// The configs worth timing for a problem: default_for first, then block and tile alternatives, all valid.
std::vector<CpuAttentionConfig> cpu_attention_variants(const AttentionProblem& problem, const CpuTarget& target);

}  // namespace tessera
