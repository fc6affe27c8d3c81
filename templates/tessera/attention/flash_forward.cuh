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
#include "tessera/attention/online_softmax.cuh"
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

template <class T>
TESSERA_DEVICE void store_element(void* base, i64 index, float value) {
  if constexpr (T::kInput == kInputF16)
    st_global(static_cast<u16*>(base) + index, f32_to_f16(value).bits);
  else
    st_global(static_cast<u16*>(base) + index, f32_to_bf16(value).bits);
}

template <class T>
TESSERA_DEVICE void flash_forward(const AttentionParams& p) {
  const float kNegInf = negative_infinity();
  using S = FlashShape<T>;
  using E = typename S::E;
  constexpr int kBR = S::kBR, BC = T::BC;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;

  const FlashBlock f = flash_block<kBR, T::Causal>(p);
  if (f.empty) return;
  const int h = f.h, b = f.b, split = f.split, kv_head = f.kv_head, seq_q = f.seq_q, q0 = f.q0;
  const int diagonal = f.diagonal, kv_end = f.kv_end;
  const i64 q_start = f.q_start, kv_start = f.kv_start;
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
  RowState st{{kNegInf, kNegInf}, {0.0f, 0.0f}, {q0 + warp * 16 + g, q0 + warp * 16 + g + 8}};

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
    float rescale[2];
    online_softmax<T>(s, st, rescale, block * BC, kv_end, diagonal, h, b, p);
    rescale_rows(o, rescale);

    // O += P·V: the accumulators of two n8 tiles of S are the A fragment of one k16 step.
#pragma unroll
    for (int kk = 0; kk < S::kPSteps; ++kk) {
      u32 a[4];
      p_fragment<T::kInput>(s, kk, a);
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
  float inverses[2], lses[2];
  finish_rows(st, inverses, lses);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = st.row[r];
    if (row >= seq_q) continue;
    const float inverse = inverses[r], lse = lses[r];
    if (p.kv_splits > 1) {  // this split's share of the row, merged by flash_combine
      const i64 partial = (static_cast<i64>(split) * p.heads + h) * p.partial_rows + b * p.partial_bs + q_start + row;
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
    if (p.lse != nullptr && t == 0) st_global(p.lse + b * p.lse_bs + h * p.lse_hs + q_start + row, lse);
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
