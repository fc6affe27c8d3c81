// The parameter block of the CUDA attention kernel, passed by value; the host fills it from the same binding as the
// CPU path. Strides are in elements; the head dimension is contiguous (unit stride) in Q, K, V and O.
#pragma once

#include "tessera/arch/tma_descriptor.cuh"
#include "tessera/platform.cuh"

namespace tessera {

constexpr int kMaxModifierTensors = 4, kMaxModifierScalars = 8;

struct AttentionParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // null: not written
  i64 q_bs, q_hs, q_ss;
  i64 k_bs, k_hs, k_ss;
  i64 v_bs, v_hs, v_ss;
  i64 o_bs, o_hs, o_ss;
  i64 lse_bs, lse_hs;
  // Variable lengths: batch + 1 cumulative row offsets into the packed sequence dimension (null: every item has
  // seq_q and seq_kv rows); seq_q and seq_kv are then the longest.
  const i64* q_offsets;
  const i64* kv_offsets;
  int batch, heads, kv_heads, seq_q, seq_kv;
  float scale;       // the softmax scale
  float scale_log2;  // scale × log2 e: scores are kept in base 2
  // The score modifier's tensors (element [x0, x1, ...] at Σ xk·strides[k]) and scalars, in the order the spec lists
  // them.
  const float* mod_data[kMaxModifierTensors];
  i64 mod_strides[kMaxModifierTensors][4];
  float mod_scalars[kMaxModifierScalars];
  // Split keys (flash-decoding): with kv_splits > 1 the grid holds kv_splits copies of every query block, copy s
  // attending to keys [s·kv_chunk, (s+1)·kv_chunk) (kv_chunk a multiple of the key block) and writing its rows'
  // normalised O in f32 to o_partial[s][h][row][d] and their log-sum-exp to lse_partial[s][h][row]; then the combine
  // kernel weighs the splits by exp(lse) into O and the LSE. A row's index there is b·partial_bs + its packed row.
  float* o_partial;
  float* lse_partial;
  i64 partial_bs, partial_rows;
  int kv_splits, kv_chunk;
  // The Hopper kernel's TMA maps of Q, K and V, each (head dimension, rows, planes): batch item b's rows start at
  // row b·tma_rows[t] (+ its varlen offset) of plane b·tma_planes[t] + head (t = 0, 1, 2 for Q, K, V). Read through
  // the parameter (__grid_constant__); the mma.sync kernel leaves them unset.
  TmaDescriptor q_map, k_map, v_map;
  int tma_rows[3], tma_planes[3];
};

}  // namespace tessera
