// FlashAttention-2's forward pass on tensor cores. A block owns BR = 16·Warps query rows of one head; each warp owns
// 16 of them. K and V stream through shared memory in blocks of BC keys, double-buffered with cp.async into
// XOR-swizzled tiles. S = Q·Kᵀ by mma.sync m16n8k16 from ldmatrix'd fragments (Q's kept in registers for the whole
// loop); the online softmax runs on the accumulators, rows reduced across each quad by shuffles; P stays in registers
// as the A operand of O += P·V (V through ldmatrix.trans). Causal blocks past the last row's bound are never loaded.
// Grid: x = query block + blocks × (head + heads × key split), z = batch item. With split keys, flash_combine merges
// the splits' partial rows into O.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/attention/attention_params.cuh"
#include "tessera/element.cuh"
#include "tessera/warp/mma_fragments.cuh"
#include "tessera/warp/smem_swizzle.cuh"
#include "tessera/warp/tile_loader.cuh"

namespace tessera {

// T supplies: Element (half_t or bfloat16_t), kInput, D (head dimension, a multiple of 16), BC (keys per block, a
// multiple of 16), Warps, Causal, Align (elements the rows of Q, K, V guarantee: 8 for 16-byte copies), and Mod, the
// score modifier: Mod::kIdentity, or Mod::apply(s, i, j, h, b, p) on each visible scaled score.
template <class T>
struct FlashShape {
  using E = typename T::Element;
  static constexpr int kBR = 16 * T::Warps;
  static constexpr int kThreads = 32 * T::Warps;
  static constexpr int kSTiles = T::BC / 8;   // n8 tiles of S per warp
  static constexpr int kOTiles = T::D / 8;    // n8 tiles of O per warp
  static constexpr int kQSteps = T::D / 16;   // k-steps of Q·Kᵀ
  static constexpr int kPSteps = T::BC / 16;  // k-steps of P·V
  using Tile = SwizzledTile<T::D * 2>;        // every tile: rows of D 16-bit elements
  static constexpr int kQBytes = kBR * T::D * 2;
  static constexpr int kKVBytes = T::BC * T::D * 2;  // one K or V tile
  static constexpr int kSharedBytes = kQBytes + 4 * kKVBytes;
};

// Two f32 values as the 16-bit pair of an mma operand register (the lower k in the low half).
template <int kInput>
TESSERA_DEVICE u32 pack_pair(float lo, float hi) {
  if constexpr (kInput == kInputF16)
    return static_cast<u32>(f32_to_f16(lo).bits) | (static_cast<u32>(f32_to_f16(hi).bits) << 16);
  else
    return static_cast<u32>(f32_to_bf16(lo).bits) | (static_cast<u32>(f32_to_bf16(hi).bits) << 16);
}

template <class T>
TESSERA_DEVICE void store_element(void* base, i64 index, float value) {
  if constexpr (T::kInput == kInputF16)
    st_global(static_cast<u16*>(base) + index, f32_to_f16(value).bits);
  else
    st_global(static_cast<u16*>(base) + index, f32_to_bf16(value).bits);
}

TESSERA_DEVICE float negative_infinity() { return __int_as_float(0xff800000u); }

template <class T>
TESSERA_DEVICE void flash_forward(const AttentionParams& p) {
  const float kNegInf = negative_infinity();
  using S = FlashShape<T>;
  using E = typename S::E;
  constexpr int kBR = S::kBR, BC = T::BC;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;

  // The grid covers the longest sequence; with variable lengths, each batch item's rows start at its offset and a
  // block past its own length has nothing to do (the whole block leaves before any barrier).
  const int q_blocks = (p.seq_q + kBR - 1) / kBR;
  const int qb = static_cast<int>(blockIdx.x) % q_blocks, head_split = static_cast<int>(blockIdx.x) / q_blocks;
  const int h = head_split % p.heads, split = head_split / p.heads;
  const int b = static_cast<int>(blockIdx.z);
  const i64 q_start = p.q_offsets ? ld_global(p.q_offsets + b) : 0;
  const i64 kv_start = p.kv_offsets ? ld_global(p.kv_offsets + b) : 0;
  const int seq_q = p.q_offsets ? static_cast<int>(ld_global(p.q_offsets + b + 1) - q_start) : p.seq_q;
  const int seq_kv = p.kv_offsets ? static_cast<int>(ld_global(p.kv_offsets + b + 1) - kv_start) : p.seq_kv;
  const int kv_head = h / (p.heads / p.kv_heads);
  const int q0 = qb * kBR;
  if (q0 >= seq_q) return;
  const int diagonal = seq_kv - seq_q;  // causal: query i sees keys j <= i + diagonal
  int kv_end = seq_kv;
  if constexpr (T::Causal) {
    const int last = q0 + kBR - 1 + diagonal + 1;
    kv_end = last < 0 ? 0 : (last < seq_kv ? last : seq_kv);
  }
  // This block's keys: all of them, or its split's (none where the split lies past a causal end).
  int block_begin = 0, block_end = (kv_end + BC - 1) / BC;
  if (p.kv_splits > 1) {
    const int chunk_blocks = p.kv_chunk / BC;
    block_begin = split * chunk_blocks;
    block_end = block_end < block_begin + chunk_blocks ? block_end : block_begin + chunk_blocks;
  }

  const E* q = static_cast<const E*>(p.q) + b * p.q_bs + h * p.q_hs + (q_start + q0) * p.q_ss;
  const E* k = static_cast<const E*>(p.k) + b * p.k_bs + kv_head * p.k_hs + kv_start * p.k_ss;
  const E* v = static_cast<const E*>(p.v) + b * p.v_bs + kv_head * p.v_hs + kv_start * p.v_ss;
  constexpr u32 kQTile = 0, kKTile = S::kQBytes;  // then K0, V0, K1, V1
  const auto k_tile = [](int stage) { return kKTile + stage * 2 * S::kKVBytes; };
  const auto v_tile = [](int stage) { return kKTile + stage * 2 * S::kKVBytes + S::kKVBytes; };
  using Loader = TileLoader<E, BC, T::D, S::kThreads, T::Align, typename S::Tile>;
  const auto load_kv = [&](int stage, int block) {
    const int j0 = block * BC;
    Loader::load(k_tile(stage), k + j0 * p.k_ss, p.k_ss, kv_end - j0, T::D, tid);
    Loader::load(v_tile(stage), v + j0 * p.v_ss, p.v_ss, kv_end - j0, T::D, tid);
  };

  TileLoader<E, kBR, T::D, S::kThreads, T::Align, typename S::Tile>::load(kQTile, q, p.q_ss, seq_q - q0, T::D, tid);
  if (block_begin < block_end) load_kv(0, block_begin);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  u32 fq[S::kQSteps][1][4];
#pragma unroll
  for (int ks = 0; ks < S::kQSteps; ++ks)
    load_a_fragments<T::kInput, true, typename S::Tile, 1>(fq[ks], kQTile, warp * 16, ks, lane);

  float o[S::kOTiles][4];
#pragma unroll
  for (int i = 0; i < S::kOTiles; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float row_max[2] = {kNegInf, kNegInf}, row_sum[2] = {0.0f, 0.0f};  // rows g and g + 8; sums per thread
  const int row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};

  for (int block = block_begin; block < block_end; ++block) {
    const int stage = (block - block_begin) & 1;
    // The next block streams in while this one is computed; its slot was last read before the previous barrier.
    if (block + 1 < block_end) load_kv(stage ^ 1, block + 1);
    cp_async_commit();

    float s[S::kSTiles][4];
#pragma unroll
    for (int i = 0; i < S::kSTiles; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < S::kQSteps; ++ks) {
      u32 fk[S::kSTiles][2];
      load_b_fragments<T::kInput, true, typename S::Tile, S::kSTiles>(fk, k_tile(stage), 0, ks, lane);
#pragma unroll
      for (int i = 0; i < S::kSTiles; ++i) mma<T::kInput>(s[i], fq[ks][0], fk[i]);
    }

    // Online softmax in base 2 on this thread's two rows: mask, raise the max, rescale, exponentiate.
    const int j0 = block * BC;
    float block_max[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int i = 0; i < S::kSTiles; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = j0 + i * 8 + 2 * t + (e & 1), r = e >> 1;
        bool visible = j < kv_end;
        if constexpr (T::Causal) visible = visible && j <= row[r] + diagonal;
        if constexpr (T::Mod::kIdentity)
          s[i][e] = visible ? s[i][e] * p.scale_log2 : kNegInf;
        else  // the modifier sees the natural-base score; it may mask (−inf) too
          s[i][e] = visible ? T::Mod::apply(s[i][e] * p.scale, row[r], j, h, b, p) * 1.4426950408889634f : kNegInf;
        block_max[r] = fmaxf(block_max[r], s[i][e]);
      }
    float rescale[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      block_max[r] = fmaxf(block_max[r], shfl_xor(0xffffffffu, block_max[r], 1));
      block_max[r] = fmaxf(block_max[r], shfl_xor(0xffffffffu, block_max[r], 2));
      const float new_max = fmaxf(row_max[r], block_max[r]);
      const float base = new_max == kNegInf ? 0.0f : new_max;  // a row that has seen no key yet
      rescale[r] = row_max[r] == kNegInf ? 0.0f : exp2f(row_max[r] - base);
      row_max[r] = new_max;
      row_sum[r] *= rescale[r];
#pragma unroll
      for (int i = 0; i < S::kSTiles; ++i)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[i][e] = s[i][e] == kNegInf ? 0.0f : exp2f(s[i][e] - base);
          row_sum[r] += s[i][e];
        }
    }
#pragma unroll
    for (int i = 0; i < S::kOTiles; ++i) {
      o[i][0] *= rescale[0], o[i][1] *= rescale[0];
      o[i][2] *= rescale[1], o[i][3] *= rescale[1];
    }

    // O += P·V: the accumulators of two n8 tiles of S are the A fragment of one k16 step.
#pragma unroll
    for (int kk = 0; kk < S::kPSteps; ++kk) {
      const u32 a[4] = {pack_pair<T::kInput>(s[2 * kk][0], s[2 * kk][1]),
                        pack_pair<T::kInput>(s[2 * kk][2], s[2 * kk][3]),
                        pack_pair<T::kInput>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                        pack_pair<T::kInput>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      u32 fv[S::kOTiles][2];
      load_b_fragments<T::kInput, false, typename S::Tile, S::kOTiles>(fv, v_tile(stage), 0, kk, lane);
#pragma unroll
      for (int i = 0; i < S::kOTiles; ++i) mma<T::kInput>(o[i], a, fv[i]);
    }
    // The next block has landed, and every warp is done with this one's slot before it is refilled.
    cp_async_wait<0>();
    __syncthreads();
  }

  // O = accumulated / sum (0 for a row that saw no key), and the log-sum-exp. The warp's Q rows take O below: every
  // lane's reads of them (the Q fragments) come first.
  syncwarp();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += shfl_xor(0xffffffffu, sum, 1);
    sum += shfl_xor(0xffffffffu, sum, 2);
    if (row[r] >= seq_q) continue;
    const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
    const float lse = sum > 0.0f ? row_max[r] * 0.69314718055994531f + logf(sum) : kNegInf;
    if (p.kv_splits > 1) {  // this split's share of the row, merged by flash_combine
      const i64 partial =
          (static_cast<i64>(split) * p.heads + h) * p.partial_rows + b * p.partial_bs + q_start + row[r];
      // Each lane's pair of adjacent columns as one 8-byte store: a request then covers 8 rows' 32-byte sectors whole.
#pragma unroll
      for (int i = 0; i < S::kOTiles; ++i)
        st_global(reinterpret_cast<Vector<float, 2>*>(p.o_partial + partial * T::D + i * 8 + 2 * t),
                  Vector<float, 2>{{o[i][2 * r] * inverse, o[i][2 * r + 1] * inverse}});
      if (t == 0) st_global(p.lse_partial + partial, lse);
      continue;
    }
    // The row's 16-bit pairs into this warp's own rows of the Q tile (dead since Q went to registers; no other warp
    // reads them), to leave as whole row chunks below.
#pragma unroll
    for (int i = 0; i < S::kOTiles; ++i)
      st_shared<u32>(kQTile + S::Tile::offset(warp * 16 + g + 8 * r, (i * 8 + 2 * t) * 2),
                     pack_pair<T::kInput>(o[i][2 * r] * inverse, o[i][2 * r + 1] * inverse));
    if (p.lse != nullptr && t == 0) st_global(p.lse + b * p.lse_bs + h * p.lse_hs + q_start + row[r], lse);
  }
  if (p.kv_splits > 1) return;
  // The warp's 16 rows of O from shared memory in 16-byte chunks: 8 lanes store one 128-byte run of a row (the
  // fragments' own layout would store 4 lanes' 4 bytes to each of 8 rows per instruction).
  syncwarp();
  constexpr int kChunks = T::D / 8;  // 8 elements a chunk
  constexpr int kVec = T::Align;     // elements per global store: what O's alignment allows
  for (int c = lane; c < 16 * kChunks; c += 32) {
    const int r = c / kChunks, x = (c % kChunks) * 8;
    const int i = q0 + warp * 16 + r;
    if (i >= seq_q) continue;
    const Vector<u16, 8> chunk = ld_shared<Vector<u16, 8>>(kQTile + S::Tile::offset(warp * 16 + r, x * 2));
    u16* out = static_cast<u16*>(p.o) + b * p.o_bs + h * p.o_hs + (q_start + i) * p.o_ss + x;
#pragma unroll
    for (int e = 0; e < 8; e += kVec) {
      Vector<u16, kVec> part;
#pragma unroll
      for (int j = 0; j < kVec; ++j) part.v[j] = chunk.v[e + j];
      st_global(reinterpret_cast<Vector<u16, kVec>*>(out + e), part);
    }
  }
}

// The split keys' partial rows merged: O = Σ_s exp(lse_s − m)·O_s / Σ_s exp(lse_s − m) with m the largest lse_s, and
// LSE = m + log Σ_s exp(lse_s − m) (a row no split saw a key for: zeros and −inf). The grid of flash_forward without
// the splits; each thread computes elements of the block's rows.
template <class T>
TESSERA_DEVICE void flash_combine(const AttentionParams& p) {
  const float kNegInf = negative_infinity();
  constexpr int kBR = FlashShape<T>::kBR, kThreads = FlashShape<T>::kThreads;
  const int q_blocks = (p.seq_q + kBR - 1) / kBR;
  const int qb = static_cast<int>(blockIdx.x) % q_blocks, h = static_cast<int>(blockIdx.x) / q_blocks;
  const int b = static_cast<int>(blockIdx.z);
  const i64 q_start = p.q_offsets ? ld_global(p.q_offsets + b) : 0;
  const int seq_q = p.q_offsets ? static_cast<int>(ld_global(p.q_offsets + b + 1) - q_start) : p.seq_q;
  const i64 split_stride = static_cast<i64>(p.heads) * p.partial_rows;
  for (int e = static_cast<int>(threadIdx.x); e < kBR * T::D; e += kThreads) {
    const int i = qb * kBR + e / T::D, x = e % T::D;
    if (i >= seq_q) break;  // e only grows
    const i64 row = h * p.partial_rows + b * p.partial_bs + q_start + i;
    float m = kNegInf;
    for (int s = 0; s < p.kv_splits; ++s) m = fmaxf(m, ld_global(p.lse_partial + s * split_stride + row));
    float sum = 0.0f, acc = 0.0f;
    if (m != kNegInf)
      for (int s = 0; s < p.kv_splits; ++s) {
        const float lse = ld_global(p.lse_partial + s * split_stride + row);
        const float w = lse == kNegInf ? 0.0f : expf(lse - m);
        sum += w;
        acc += w * ld_global(p.o_partial + (s * split_stride + row) * T::D + x);
      }
    store_element<T>(p.o, b * p.o_bs + h * p.o_hs + (q_start + i) * p.o_ss + x, sum > 0.0f ? acc / sum : 0.0f);
    if (p.lse != nullptr && x == 0)
      st_global(p.lse + b * p.lse_bs + h * p.lse_hs + q_start + i, sum > 0.0f ? m + logf(sum) : kNegInf);
  }
}

}  // namespace tessera
