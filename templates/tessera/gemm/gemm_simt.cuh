// The SIMT f32 GEMM: a block computes a BM×BN tile of D; lanes of a warp form an 8×4 grid and each owns a
// (WM/8)×(WN/4) register tile in groups of 4 contiguous rows/columns, so that its shared-memory reads are float4
// broadcasts. Shared memory holds A as K rows of M and B as K rows of N, double-buffered: the next K tile is read
// from global memory (vector loads where the layout allows) into registers while the current one is multiplied.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/block/epilogue_store.cuh"
#include "tessera/block/raster.cuh"
#include "tessera/gemm/gemm_params.cuh"

namespace tessera {

template <class T>
struct SimtShape {
  static constexpr int kWarpsN = T::BN / T::WN;
  static constexpr int kThreads = 32 * (T::BM / T::WM) * kWarpsN;
  static constexpr int kTM = T::WM / 8, kTN = T::WN / 4;
  static constexpr int kAChunks = T::BM * T::BK / 4 / kThreads;  // float4 chunks per thread and tile
  static constexpr int kBChunks = T::BN * T::BK / 4 / kThreads;
  // Rows of the shared tiles padded by 4 floats: a K-major operand's chunks are stored transposed, down its
  // columns, and unpadded the two lanes of each row hit one bank (2.40 wavefronts per store where 1.60 would do).
  static constexpr int kAPitch = T::BM + 4, kBPitch = T::BN + 4;
  static constexpr int kATileFloats = T::BK * kAPitch, kBTileFloats = T::BK * kBPitch;
};

// Four consecutive floats at src, `valid` of them inside the matrix; kAlign says which vector width is safe.
template <int kAlign>
TESSERA_DEVICE void load_4(float (&v)[4], const float* src, int valid) {
  if (kAlign == 4 && valid == 4) {
    const Vector<float, 4> x = ld_global(reinterpret_cast<const Vector<float, 4>*>(src));
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = x.v[i];
    return;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = i < valid ? ld_global(src + i) : 0.0f;
}

// Chunks of 4 along the operand's contiguous dimension: (row r, columns c..c+3) of a kRows×kCols view with
// element (r, c) at global + r * row_stride + c.
template <int kRows, int kCols, int kThreads, int kChunks, int kAlign>
TESSERA_DEVICE void load_tile(float (&regs)[kChunks][4], const float* global, i64 row_stride, int rows_valid,
                              int cols_valid, int tid) {
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int chunk = tid + i * kThreads;
    const int r = chunk / (kCols / 4), c = (chunk % (kCols / 4)) * 4;
    int valid = cols_valid - c;
    valid = r >= rows_valid || valid < 0 ? 0 : (valid > 4 ? 4 : valid);
    load_4<kAlign>(regs[i], valid > 0 ? global + r * row_stride + c : global, valid);
  }
}

// Stores the chunks into a shared tile (byte offset `tile`) of K rows of kWidth floats (M or N columns, padded).
// kKMajor: the chunk runs along K (it is transposed into four rows); otherwise along M/N (one float4 row segment).
template <int kRows, int kCols, int kThreads, int kChunks, bool kKMajor, int kWidth>
TESSERA_DEVICE void store_tile(u32 tile, const float (&regs)[kChunks][4], int tid) {
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int chunk = tid + i * kThreads;
    const int r = chunk / (kCols / 4), c = (chunk % (kCols / 4)) * 4;
    if constexpr (kKMajor) {
#pragma unroll
      for (int j = 0; j < 4; ++j) st_shared<float>(tile + static_cast<u32>(((c + j) * kWidth + r) * 4), regs[i][j]);
    } else {
      Vector<float, 4> v;
#pragma unroll
      for (int j = 0; j < 4; ++j) v.v[j] = regs[i][j];
      st_shared(tile + static_cast<u32>((r * kWidth + c) * 4), v);
    }
  }
}

template <class T, class Epi>
TESSERA_DEVICE void gemm_simt(const GemmParams& p) {
  using S = SimtShape<T>;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_row = (warp / S::kWarpsN) * T::WM, warp_col = (warp % S::kWarpsN) * T::WN;
  const int lane_m = lane >> 2, lane_n = lane & 3;

  int tile_m, tile_n;
  raster_tile<T::Swizzle>(blockIdx.x, (p.m + T::BM - 1) / T::BM, (p.n + T::BN - 1) / T::BN, tile_m, tile_n);
  const int batch = blockIdx.z / T::SplitK, split = blockIdx.z % T::SplitK;
  const int m0 = tile_m * T::BM, n0 = tile_n * T::BN;
  const int k_begin = split * p.k_per_split;
  const int k_end = p.k < k_begin + p.k_per_split ? p.k : k_begin + p.k_per_split;
  const int k_tiles = k_end > k_begin ? (k_end - k_begin + T::BK - 1) / T::BK : 0;
  const float* a = static_cast<const float*>(p.a.data) + batch * p.a.bs;
  const float* b = static_cast<const float*>(p.b.data) + batch * p.b.bs;

  float ra[S::kAChunks][4], rb[S::kBChunks][4];
  auto load_global = [&](int k0) {
    const int k_valid = k_end - k0;
    if constexpr (T::AKMajor)  // A row-major: rows of M, K contiguous
      load_tile<T::BM, T::BK, S::kThreads, S::kAChunks, T::AlignA>(ra, a + m0 * p.a.rs + k0, p.a.rs, p.m - m0, k_valid,
                                                                   tid);
    else
      load_tile<T::BK, T::BM, S::kThreads, S::kAChunks, T::AlignA>(ra, a + k0 * p.a.cs + m0, p.a.cs, k_valid, p.m - m0,
                                                                   tid);
    if constexpr (T::BKMajor)  // B column-major: rows of N, K contiguous
      load_tile<T::BN, T::BK, S::kThreads, S::kBChunks, T::AlignB>(rb, b + n0 * p.b.cs + k0, p.b.cs, p.n - n0, k_valid,
                                                                   tid);
    else
      load_tile<T::BK, T::BN, S::kThreads, S::kBChunks, T::AlignB>(rb, b + k0 * p.b.rs + n0, p.b.rs, k_valid, p.n - n0,
                                                                   tid);
  };
  auto store_shared = [&](int buffer) {
    const u32 as = static_cast<u32>(buffer * (S::kATileFloats + S::kBTileFloats) * 4);
    const u32 bs = as + S::kATileFloats * 4;
    if constexpr (T::AKMajor)
      store_tile<T::BM, T::BK, S::kThreads, S::kAChunks, true, S::kAPitch>(as, ra, tid);
    else
      store_tile<T::BK, T::BM, S::kThreads, S::kAChunks, false, S::kAPitch>(as, ra, tid);
    if constexpr (T::BKMajor)
      store_tile<T::BN, T::BK, S::kThreads, S::kBChunks, true, S::kBPitch>(bs, rb, tid);
    else
      store_tile<T::BK, T::BN, S::kThreads, S::kBChunks, false, S::kBPitch>(bs, rb, tid);
  };

  float acc[S::kTM][S::kTN];
#pragma unroll
  for (int i = 0; i < S::kTM; ++i)
#pragma unroll
    for (int j = 0; j < S::kTN; ++j) acc[i][j] = 0.0f;

  if (k_tiles > 0) {
    load_global(k_begin);
    store_shared(0);
  }
  __syncthreads();
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int buffer = kt & 1;
    if (kt + 1 < k_tiles) load_global(k_begin + (kt + 1) * T::BK);
    const u32 as = static_cast<u32>(buffer * (S::kATileFloats + S::kBTileFloats) * 4);
    const u32 bs = as + S::kATileFloats * 4;
#pragma unroll
    for (int k = 0; k < T::BK; ++k) {
      float fa[S::kTM], fb[S::kTN];
#pragma unroll
      for (int i = 0; i < S::kTM; i += 4) {
        const Vector<float, 4> v = ld_shared<Vector<float, 4>>(
            as + static_cast<u32>((k * S::kAPitch + warp_row + (i / 4) * 32 + lane_m * 4) * 4));
        fa[i] = v.v[0], fa[i + 1] = v.v[1], fa[i + 2] = v.v[2], fa[i + 3] = v.v[3];
      }
#pragma unroll
      for (int j = 0; j < S::kTN; j += 4) {
        const Vector<float, 4> v = ld_shared<Vector<float, 4>>(
            bs + static_cast<u32>((k * S::kBPitch + warp_col + (j / 4) * 16 + lane_n * 4) * 4));
        fb[j] = v.v[0], fb[j + 1] = v.v[1], fb[j + 2] = v.v[2], fb[j + 3] = v.v[3];
      }
#pragma unroll
      for (int i = 0; i < S::kTM; ++i)
#pragma unroll
        for (int j = 0; j < S::kTN; ++j) acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
    }
    // The other buffer was last read in iteration kt-1, which every thread finished before the barrier below it.
    if (kt + 1 < k_tiles) store_shared(buffer ^ 1);
    __syncthreads();
  }

  if constexpr (T::SplitK > 1 && !T::DRowMajor) {
    // Partial sums into a column-major workspace: each lane's groups of 4 consecutive rows, one column at a time
    // (8 lanes of a column cover 32 consecutive rows).
#pragma unroll
    for (int i = 0; i < S::kTM; i += 4) {
      const i64 m = m0 + warp_row + (i / 4) * 32 + lane_m * 4;
#pragma unroll
      for (int j = 0; j < S::kTN; ++j) {
        const i64 n = n0 + warp_col + (j / 4) * 16 + lane_n * 4 + (j & 3);
        if (m >= p.m || n >= p.n) continue;
        float* w = workspace_element<false>(p, split, m, n, batch);
        if (m + 4 <= p.m && p.m % 4 == 0) {  // columns of the workspace 16-byte aligned: one vector store
          st_global(reinterpret_cast<Vector<float, 4>*>(w),
                    Vector<float, 4>{{acc[i][j], acc[i + 1][j], acc[i + 2][j], acc[i + 3][j]}});
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q)
            if (m + q < p.m) st_global(w + q, acc[i + q][j]);
        }
      }
    }
    return;
  }
  // Epilogue from registers: groups of 4 contiguous outputs along D's contiguous dimension.
#pragma unroll
  for (int i = 0; i < S::kTM; ++i) {
    const i64 m = m0 + warp_row + (i / 4) * 32 + lane_m * 4 + (i & 3);
#pragma unroll
    for (int j = 0; j < S::kTN; j += 4) {
      const i64 n = n0 + warp_col + (j / 4) * 16 + lane_n * 4;
      if (m >= p.m || n >= p.n) continue;
      const int valid = p.n - n < 4 ? static_cast<int>(p.n - n) : 4;
      if constexpr (T::SplitK > 1) {
        float* w = workspace_element<true>(p, split, m, n, batch);
        if (valid == 4 && p.n % 4 == 0) {  // rows of the workspace 16-byte aligned: one vector store
          st_global(reinterpret_cast<Vector<float, 4>*>(w),
                    Vector<float, 4>{{acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]}});
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q)
            if (q < valid) st_global(w + q, acc[i][j + q]);
        }
      } else if constexpr (T::DRowMajor && T::AlignC == 4) {
        float values[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) values[q] = q < valid ? Epi::apply(acc[i][j + q], m, n + q, batch, p) : 0.0f;
        store_d<typename T::Out, true, 4>(p, m, n, batch, values, valid);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (q < valid)
            st_global(d_element<typename T::Out, T::DRowMajor>(p, m, n + q, batch),
                      from_f32<typename T::Out>(Epi::apply(acc[i][j + q], m, n + q, batch, p)));
      }
    }
  }
}

}  // namespace tessera
