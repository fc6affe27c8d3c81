// The pieces both attention kernels (mma.sync and wgmma) share: what a block computes, and per warp the online
// softmax, rescaling, P as an MMA operand and the rows' final sums. A warp's 16 query rows hold S and O in the
// m16n8 C-fragment layout (mma.sync's, which wgmma's accumulators repeat per warp): a thread owns rows g and g + 8
// (g = lane / 4) and, of each n8 tile, columns 2t and 2t + 1 (t = lane % 4); elements 0-1 are row g's, 2-3 row g + 8's.
// An include guard rather than #pragma once: the seeded-bug tests put a mutated copy of this text in its place.
#ifndef TESSERA_ATTENTION_ONLINE_SOFTMAX_CUH
#define TESSERA_ATTENTION_ONLINE_SOFTMAX_CUH

#include "tessera/arch.cuh"
#include "tessera/attention/attention_params.cuh"
#include "tessera/element.cuh"
#include "tessera/warp/mma_fragments.cuh"

namespace tessera {

TESSERA_DEVICE float negative_infinity() { return __int_as_float(0xff800000u); }

// Two f32 values as the 16-bit pair of an mma operand register (the lower k in the low half).
template <int kInput>
TESSERA_DEVICE u32 pack_pair(float lo, float hi) {
  if constexpr (kInput == kInputF16)
    return static_cast<u32>(f32_to_f16(lo).bits) | (static_cast<u32>(f32_to_f16(hi).bits) << 16);
  else
    return static_cast<u32>(f32_to_bf16(lo).bits) | (static_cast<u32>(f32_to_bf16(hi).bits) << 16);
}

// What a block of kBR query rows takes (both kernels' grids: x = query block + blocks × (head + heads × key split),
// z = batch item): the grid covers the longest sequence; with variable lengths, each item's rows start at its offset
// and a block at or past its own length has nothing to do (`empty`: it leaves before any barrier). Causal: query i
// sees keys j <= i + diagonal, and the block's keys end at its last row's bound.
struct FlashBlock {
  int h, b, split, kv_head;
  i64 q_start, kv_start;
  int seq_q, seq_kv, q0, diagonal, kv_end;
  bool empty;
};

template <int kBR, bool kCausal>
TESSERA_DEVICE FlashBlock flash_block(const AttentionParams& p) {
  FlashBlock f;
  const int q_blocks = (p.seq_q + kBR - 1) / kBR;
  const int qb = static_cast<int>(blockIdx.x) % q_blocks, head_split = static_cast<int>(blockIdx.x) / q_blocks;
  f.h = head_split % p.heads, f.split = head_split / p.heads;
  f.b = static_cast<int>(blockIdx.z);
  f.q_start = p.q_offsets ? ld_global(p.q_offsets + f.b) : 0;
  f.kv_start = p.kv_offsets ? ld_global(p.kv_offsets + f.b) : 0;
  f.seq_q = p.q_offsets ? static_cast<int>(ld_global(p.q_offsets + f.b + 1) - f.q_start) : p.seq_q;
  f.seq_kv = p.kv_offsets ? static_cast<int>(ld_global(p.kv_offsets + f.b + 1) - f.kv_start) : p.seq_kv;
  f.kv_head = f.h / (p.heads / p.kv_heads);
  f.q0 = qb * kBR;
  f.empty = f.q0 >= f.seq_q;
  f.diagonal = f.seq_kv - f.seq_q;
  f.kv_end = f.seq_kv;
  if constexpr (kCausal) {
    const int last = f.q0 + kBR - 1 + f.diagonal + 1;
    f.kv_end = last < 0 ? 0 : (last < f.seq_kv ? last : f.seq_kv);
  }
  return f;
}

// A thread's running softmax state for its two rows, in base 2: the largest score seen and its share of the sum.
struct RowState {
  float max[2], sum[2];
  int row[2];  // the rows' query positions within the sequence
};

// One key block of online softmax on a thread's fragments s of S = Q·Kᵀ (columns j0 + 8i + 2t + (e & 1)): mask keys
// at or past kv_end and (causal) past row + diagonal, apply the modifier, raise the rows' max (reduced across the
// quad), turn s into P = exp2(s − max) and add it to the sums; returns in `rescale` what the rows' earlier O must be
// multiplied by.
template <class T, int kTiles>
TESSERA_DEVICE void online_softmax(float (&s)[kTiles][4], RowState& st, float (&rescale)[2], int j0, int kv_end,
                                   int diagonal, int h, int b, const AttentionParams& p) {
  const float kNegInf = negative_infinity();
  const int t = static_cast<int>(threadIdx.x) & 3;
  float block_max[2] = {kNegInf, kNegInf};
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = j0 + i * 8 + 2 * t + (e & 1), r = e >> 1;
      bool visible = j < kv_end;
      if constexpr (T::Causal) visible = visible && j <= st.row[r] + diagonal;
      if constexpr (T::Mod::kIdentity)
        s[i][e] = visible ? s[i][e] * p.scale_log2 : kNegInf;
      else  // the modifier sees the natural-base score; it may mask (−inf) too
        s[i][e] = visible ? T::Mod::apply(s[i][e] * p.scale, st.row[r], j, h, b, p) * 1.4426950408889634f : kNegInf;
      block_max[r] = fmaxf(block_max[r], s[i][e]);
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    block_max[r] = fmaxf(block_max[r], shfl_xor(0xffffffffu, block_max[r], 1));
    block_max[r] = fmaxf(block_max[r], shfl_xor(0xffffffffu, block_max[r], 2));
    const float new_max = fmaxf(st.max[r], block_max[r]);
    const float base = new_max == kNegInf ? 0.0f : new_max;  // a row that has seen no key yet
    rescale[r] = st.max[r] == kNegInf ? 0.0f : exp2f(st.max[r] - base);
    st.max[r] = new_max;
    st.sum[r] *= rescale[r];
#pragma unroll
    for (int i = 0; i < kTiles; ++i)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        s[i][e] = s[i][e] == kNegInf ? 0.0f : exp2f(s[i][e] - base);
        st.sum[r] += s[i][e];
      }
  }
}

// O's fragments scaled by the rows' rescale factors.
template <int kTiles>
TESSERA_DEVICE void rescale_rows(float (&o)[kTiles][4], const float (&rescale)[2]) {
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    o[i][0] *= rescale[0], o[i][1] *= rescale[0];
    o[i][2] *= rescale[1], o[i][3] *= rescale[1];
  }
}

// P's k16 step kk as the A fragment of O += P·V: the accumulators of S's n8 tiles 2kk and 2kk + 1.
template <int kInput, int kTiles>
TESSERA_DEVICE void p_fragment(const float (&s)[kTiles][4], int kk, u32 (&a)[4]) {
  a[0] = pack_pair<kInput>(s[2 * kk][0], s[2 * kk][1]);
  a[1] = pack_pair<kInput>(s[2 * kk][2], s[2 * kk][3]);
  a[2] = pack_pair<kInput>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = pack_pair<kInput>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// The rows' final sums (reduced across the quad), what O is multiplied by (0 for a row that saw no key) and the
// natural-base log-sum-exp (−inf there).
TESSERA_DEVICE void finish_rows(const RowState& st, float (&inverse)[2], float (&lse)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = st.sum[r];
    sum += shfl_xor(0xffffffffu, sum, 1);
    sum += shfl_xor(0xffffffffu, sum, 2);
    inverse[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
    lse[r] = sum > 0.0f ? st.max[r] * 0.69314718055994531f + logf(sum) : negative_infinity();
  }
}

}  // namespace tessera

#endif  // TESSERA_ATTENTION_ONLINE_SOFTMAX_CUH
