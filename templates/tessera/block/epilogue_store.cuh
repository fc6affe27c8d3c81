// Writing results: a slab of accumulators, already in shared or registers, goes through the emitted epilogue to D
// with the widest stores D's alignment allows, or raw to the split-K workspace.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/element.cuh"
#include "tessera/epilogue_math.cuh"
#include "tessera/gemm/gemm_params.cuh"

namespace tessera {

// D(m, n) of batch b, for a row- or column-major D.
template <class Out, bool kRowMajor>
TESSERA_DEVICE Out* d_element(const GemmParams& p, i64 m, i64 n, i64 b) {
  Out* d = static_cast<Out*>(const_cast<void*>(p.d.data)) + b * p.d.bs;
  return kRowMajor ? d + m * p.d.rs + n : d + m + n * p.d.cs;
}

// Stores kVec consecutive outputs along D's contiguous dimension starting at (m, n); `valid` of them are inside
// the matrix. values[i] is at (m, n + i) for a row-major D and (m + i, n) for a column-major one.
template <class Out, bool kRowMajor, int kVec>
TESSERA_DEVICE void store_d(const GemmParams& p, i64 m, i64 n, i64 b, const float (&values)[kVec], int valid) {
  Out* d = d_element<Out, kRowMajor>(p, m, n, b);
  if (valid == kVec) {
    Vector<Out, kVec> v;
#pragma unroll
    for (int i = 0; i < kVec; ++i) v.v[i] = from_f32<Out>(values[i]);
    st_global(reinterpret_cast<Vector<Out, kVec>*>(d), v);
  } else {
    // Unrolled with a predicate: a loop bounded by `valid` would index `values` dynamically (local memory).
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (i < valid) st_global(d + i, from_f32<Out>(values[i]));
  }
}

// Partial sums of one K split, f32, laid out as D is: workspace[split][b][m][n] for a row-major D,
// workspace[split][b][n][m] for a column-major one, so that the reduction reads and writes along the same dimension.
template <bool kRowMajor>
TESSERA_DEVICE float* workspace_element(const GemmParams& p, int split, i64 m, i64 n, i64 b) {
  const i64 slice = static_cast<i64>(split) * p.batch + b;
  return p.workspace + (kRowMajor ? (slice * p.m + m) * p.n + n : (slice * p.n + n) * p.m + m);
}

// Output idx of a batch's M x N in D's storage order (n fastest for a row-major D, m for a column-major one).
template <bool kRowMajor>
TESSERA_DEVICE void output_at(const GemmParams& p, i64 idx, i64& m, i64& n, i64& b) {
  const i64 per_batch = static_cast<i64>(p.m) * p.n;
  b = idx / per_batch;
  const i64 rem = idx - b * per_batch;
  if (kRowMajor)
    m = rem / p.n, n = rem - m * p.n;
  else
    n = rem / p.m, m = rem - n * p.m;
}

// Where one output tile's products go: D through the epilogue, or raw partial sums into workspace slice `slot`.
enum TileOutput { kToD = 0, kToWorkspace = 1 };

// Floats per row of a warp's epilogue slab: WN + 8 puts the four rows a half-warp's 8-byte stores reach 8 banks
// apart, so its 16 lanes cover the 32 banks once.
template <int kWN>
constexpr int kSlabPitch = kWN + 8;

// One warp's 16 x kWN accumulators in mma.sync's C-fragment layout (acc[j][i]: rows g and g+8, columns 8j+2t and
// 8j+2t+1, g = lane/4, t = lane%4; wgmma's accumulators are laid out the same within each warp) go through shared
// memory at `slab` (16 x kSlabPitch<kWN> floats of the warp's own) and out: each lane's pairs of adjacent columns
// as 8-byte stores, then its lanes read the slab back along D's contiguous dimension and store AlignC elements per
// lane through the epilogue (a row-major D reads them as one vector: 8 lanes of 16 bytes cover one 128-byte line),
// or raw into the workspace. Rows from row_base, columns from col_base, bounded by p.m and p.n.
template <class T, class Epi, int kOutput, int kWN>
TESSERA_DEVICE void store_warp_slab(const GemmParams& p, const float (&acc)[kWN / 8][4], u32 slab, int lane,
                                    i64 row_base, i64 col_base, int batch, int slot, int pieces = 0) {
  constexpr int kPitch = kSlabPitch<kWN>;
  const auto at = [&](int r, int c) { return slab + static_cast<u32>((r * kPitch + c) * 4); };
  // A column-major D stages the slab transposed instead (a column's 16 rows contiguous), its 16-byte chunks
  // XOR-swizzled within each 128-byte line (a pair of columns) by the pair's index: the 32 lanes of each scalar
  // store then reach 32 banks, and 8 lanes reading a chunk each cover one line.
  const auto at_transposed = [&](int r, int c) {
    const int line = c >> 1, chunk = ((c & 1) * 4 + (r >> 2)) ^ ((line * 2) & 7);
    return slab + static_cast<u32>(((line * 8 + chunk) * 4 + (r & 3)) * 4);
  };
  constexpr bool kTransposed = !T::DRowMajor;
  const int g = lane >> 2, t = lane & 3;
  constexpr int kVec = kOutput == kToWorkspace ? 1 : T::AlignC;
  // Up to 4 floats per lane read back (16-bit outputs aligned for 8 store 4 at a time: 8 bytes per lane, still
  // coalesced).
  constexpr int kRead = kVec < 4 ? kVec : 4;
#pragma unroll
  for (int ni = 0; ni < kWN / 8; ++ni) {
    if constexpr (kTransposed) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        st_shared<float>(at_transposed(g + (i >> 1) * 8, ni * 8 + t * 2 + (i & 1)), acc[ni][i]);
    } else {
      st_shared(at(g, ni * 8 + t * 2), Vector<float, 2>{{acc[ni][0], acc[ni][1]}});
      st_shared(at(g + 8, ni * 8 + t * 2), Vector<float, 2>{{acc[ni][2], acc[ni][3]}});
    }
  }
  syncwarp();
  if constexpr (kOutput == kToWorkspace) {
    // Raw partial sums along the workspace's contiguous dimension, D's (a transposed slab is read down its
    // columns).
    for (int s = lane; s < 16 * kWN; s += 32) {
      const int r = kTransposed ? s % 16 : s / kWN, c = kTransposed ? s / 16 : s % kWN;
      if (row_base + r < p.m && col_base + c < p.n)
        st_global(workspace_element<T::DRowMajor>(p, slot, row_base + r, col_base + c, batch),
                  ld_shared<float>(kTransposed ? at_transposed(r, c) : at(r, c)));
    }
  } else {
    // Along D's contiguous dimension, kRead elements per lane: a row's columns (row-major D) or a column's rows.
    constexpr bool kRows = T::DRowMajor;
    constexpr int kPer = (kRows ? kWN : 16) / kRead, kLines = kRows ? 16 : kWN;
    for (int s = lane; s < kLines * kPer; s += 32) {
      const int line = s / kPer, along = (s % kPer) * kRead;
      const int r = kRows ? line : along, c = kRows ? along : line;
      const i64 m = row_base + r, n = col_base + c;
      if (m >= p.m || n >= p.n) continue;
      const i64 left = kRows ? p.n - n : p.m - m;
      const int valid = left < kRead ? static_cast<int>(left) : kRead;
      Vector<float, kRead> slab_values = ld_shared<Vector<float, kRead>>(kRows ? at(r, c) : at_transposed(r, c));
      // A stream-K tile's other pieces, laid out as D: read along the same dimension.
      for (int s = 0; s < pieces; ++s)
#pragma unroll
        for (int i = 0; i < kRead; ++i)
          if (i < valid)
            slab_values.v[i] +=
                ld_global(workspace_element<T::DRowMajor>(p, s, kRows ? m : m + i, kRows ? n + i : n, batch));
      float values[kRead];
#pragma unroll
      for (int i = 0; i < kRead; ++i)
        values[i] = i < valid ? Epi::apply(slab_values.v[i], kRows ? m : m + i, kRows ? n + i : n, batch, p) : 0.0f;
      store_d<typename T::Out, kRows, kRead>(p, m, n, batch, values, valid);
    }
  }
  syncwarp();
}

// One warp's 16 x kWN accumulators (the C-fragment layout above) finished and stored by TMA: each lane applies the
// epilogue to its pairs (after adding the `pieces` partial sums stored for them, as stream-K's finishing block
// does) and writes them as D's type into boxes of 16 rows x 128 bytes at `staging` (the warp's own, 2 KiB a box,
// 1024-aligned), their 16-byte chunks XORed by the row as the 128-byte swizzle of D's descriptor reads them; lane 0
// then stores the boxes and waits until they have been read. Rows and columns past D's edges are computed as zeros, and
// TMA does not write them.
template <class T, class Epi, int kWN>
TESSERA_DEVICE void store_warp_rows_by_tma(const GemmParams& p, const float (&acc)[kWN / 8][4], u32 staging, int lane,
                                           i64 row_base, i64 col_base, int batch, int pieces) {
  using Out = typename T::Out;
  constexpr int kBoxCols = 128 / static_cast<int>(sizeof(Out));
  static_assert(kWN % 32 == 0, "n8 blocks in fours");
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int ni = 0; ni < kWN / 8; ++ni)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = g + 8 * h, c = ni * 8 + 2 * t;
      float v[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const i64 m = row_base + r, n = col_base + c + e;
        float x = acc[ni][2 * h + e];
        if (m < p.m && n < p.n) {
          for (int s = 0; s < pieces; ++s) x += ld_global(workspace_element<true>(p, s, m, n, batch));
          v[e] = Epi::apply(x, m, n, batch, p);
        } else {
          v[e] = 0.0f;
        }
      }
      const u32 linear = static_cast<u32>(r * 128 + (c % kBoxCols) * static_cast<int>(sizeof(Out)));
      const u32 at = staging + static_cast<u32>(c / kBoxCols) * 2048 + (linear ^ (static_cast<u32>(r & 7) << 4));
      if constexpr (sizeof(Out) == 4) {
        // As an 8-byte pair, served a half-warp at a time, a store's lanes (4 rows, 4 pairs) would reach only 4 of a
        // row's 8 swizzled chunks, two lanes a bank. As two 4-byte stores in which the upper pairs' lanes (t >= 2)
        // write their second column first, each store's 32 lanes reach the 32 banks once.
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const int e = (t >> 1) ^ k;
          st_shared(at + static_cast<u32>(e) * 4, e ? v[1] : v[0]);
        }
      } else {
        st_shared(at, Vector<Out, 2>{{from_f32<Out>(v[0]), from_f32<Out>(v[1])}});  // 32 lanes x 4 bytes: 32 banks
      }
    }
  fence_proxy_async();  // the boxes' generic-proxy writes before the copy engine's reads
  syncwarp();
  if (lane == 0) {
    if (row_base < p.m)
      for (int box = 0; box < kWN / kBoxCols; ++box)
        tma_store_3d(&p.d_map, staging + static_cast<u32>(box) * 2048, static_cast<int>(col_base) + box * kBoxCols,
                     static_cast<int>(row_base), batch);
    tma_store_commit();
    tma_store_wait();
  }
  syncwarp();
}

// The second kernel of a split-K GEMM: sums the splits of each output and applies the epilogue.
template <class T, class Epi>
TESSERA_DEVICE void splitk_reduce(const GemmParams& p) {
  const i64 total = static_cast<i64>(p.batch) * p.m * p.n;
  for (i64 idx = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<i64>(gridDim.x) * blockDim.x) {
    i64 m, n, b;
    output_at<T::DRowMajor>(p, idx, m, n, b);
    float sum = 0.0f;
    for (int s = 0; s < T::SplitK; ++s) sum += ld_global(workspace_element<T::DRowMajor>(p, s, m, n, b));
    st_global(d_element<typename T::Out, T::DRowMajor>(p, m, n, b),
              from_f32<typename T::Out>(Epi::apply(sum, m, n, b, p)));
  }
}

}  // namespace tessera
