// The Ampere-class tensor-core GEMM: a block computes a BM×BN tile of D with warps of WM×WN, through a
// Stages-deep ring of cp.async copies into XOR-swizzled shared memory, ldmatrix fragment loads double-buffered in
// registers, and mma.sync; the epilogue goes through shared memory so that D is written with coalesced vector
// stores. Grid: x = rasterised output tiles, z = batch × split_k.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/block/epilogue_store.cuh"
#include "tessera/block/raster.cuh"
#include "tessera/gemm/gemm_params.cuh"
#include "tessera/warp/mma_fragments.cuh"
#include "tessera/warp/smem_swizzle.cuh"
#include "tessera/warp/tile_loader.cuh"

namespace tessera {

// T supplies: Element (A/B in memory), Out (C/D in memory), kInput, BM, BN, BK, WM, WN, Stages, SplitK, Swizzle,
// AlignA, AlignB, AlignC, AKMajor (A row-major), BKMajor (B column-major), DRowMajor.
template <class T>
struct TensorOpShape {
  using E = typename T::Element;
  static constexpr int kElem = static_cast<int>(sizeof(E));
  static constexpr int kWarpsN = T::BN / T::WN;
  static constexpr int kThreads = 32 * (T::BM / T::WM) * kWarpsN;
  static constexpr int kMmaK = kMmaKOf<T::kInput>;
  static constexpr int kMI = T::WM / 16;  // m16 tiles per warp
  static constexpr int kNI = T::WN / 8;   // n8 tiles per warp
  static constexpr int kKSteps = T::BK / kMmaK;
  // Shared tiles: K-major operands are kept as rows of K, MN-major ones as rows of M (N).
  static constexpr int kARows = T::AKMajor ? T::BM : T::BK, kACols = T::AKMajor ? T::BK : T::BM;
  static constexpr int kBRows = T::BKMajor ? T::BN : T::BK, kBCols = T::BKMajor ? T::BK : T::BN;
  using ATile = SwizzledTile<kACols * kElem>;
  using BTile = SwizzledTile<kBCols * kElem>;
  static constexpr int kABytes = T::BM * T::BK * kElem;
  static constexpr int kBBytes = T::BN * T::BK * kElem;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // Floats per row of a warp's epilogue slab: WN + 8 puts the four rows a half-warp's 8-byte stores reach 8 banks
  // apart, so its 16 lanes cover the 32 banks once.
  static constexpr int kStagePitch = T::WN + 8;
};

template <class T, class Epi>
TESSERA_DEVICE void gemm_tensorop(const GemmParams& p) {
  using S = TensorOpShape<T>;
  using E = typename S::E;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_row = (warp / S::kWarpsN) * T::WM, warp_col = (warp % S::kWarpsN) * T::WN;

  int tile_m, tile_n;
  raster_tile<T::Swizzle>(blockIdx.x, (p.m + T::BM - 1) / T::BM, (p.n + T::BN - 1) / T::BN, tile_m, tile_n);
  const int batch = blockIdx.z / T::SplitK, split = blockIdx.z % T::SplitK;
  const int m0 = tile_m * T::BM, n0 = tile_n * T::BN;
  const int k_begin = split * p.k_per_split;
  const int k_end = p.k < k_begin + p.k_per_split ? p.k : k_begin + p.k_per_split;
  const int k_tiles = k_end > k_begin ? (k_end - k_begin + T::BK - 1) / T::BK : 0;

  const E* a = static_cast<const E*>(p.a.data) + batch * p.a.bs;
  const E* b = static_cast<const E*>(p.b.data) + batch * p.b.bs;

  // One stage: A then B, each addressed as (row, contiguous column) of its shared tile; each thread's copy offsets
  // are set up once for the whole K loop.
  const i64 a_stride = T::AKMajor ? p.a.rs : p.a.cs, b_stride = T::BKMajor ? p.b.cs : p.b.rs;
  const TileIterator<E, S::kARows, S::kACols, S::kThreads, T::AlignA, typename S::ATile> a_copies(a_stride, tid);
  const TileIterator<E, S::kBRows, S::kBCols, S::kThreads, T::AlignB, typename S::BTile> b_copies(b_stride, tid);
  auto load_stage = [&](int stage, int k0) {
    const u32 tile = stage * S::kStageBytes;
    const int k_valid = k_end - k0;
    if constexpr (T::AKMajor)
      a_copies.load(tile, a + m0 * p.a.rs + k0, a_stride, p.m - m0, k_valid, tid);
    else
      a_copies.load(tile, a + k0 * p.a.cs + m0, a_stride, k_valid, p.m - m0, tid);
    if constexpr (T::BKMajor)
      b_copies.load(tile + S::kABytes, b + n0 * p.b.cs + k0, b_stride, p.n - n0, k_valid, tid);
    else
      b_copies.load(tile + S::kABytes, b + k0 * p.b.rs + n0, b_stride, k_valid, p.n - n0, tid);
  };

  float acc[S::kMI][S::kNI][4];
#pragma unroll
  for (int mi = 0; mi < S::kMI; ++mi)
#pragma unroll
    for (int ni = 0; ni < S::kNI; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mi][ni][i] = 0.0f;

        // Prologue: Stages-1 tiles in flight. Every slot commits a group, empty or not, so wait_group counts line up.
#pragma unroll
  for (int s = 0; s < T::Stages - 1; ++s) {
    if (s < k_tiles) load_stage(s, k_begin + s * T::BK);
    cp_async_commit();
  }

  // Each lane's fragment offsets within a stage, for the whole K loop.
  const FragmentOffsets<T::kInput, T::AKMajor, typename S::ATile, S::kMI, S::kKSteps, true> a_at(warp_row, lane);
  const FragmentOffsets<T::kInput, T::BKMajor, typename S::BTile, S::kNI, S::kKSteps, false> b_at(warp_col, lane);
  u32 fa[2][S::kMI][4];
  u32 fb[2][S::kNI][2];
  int read_stage = 0, write_stage = T::Stages - 1;
  for (int kt = 0; kt < k_tiles; ++kt) {
    // Tile kt has landed for this thread; the barrier makes it visible to all and retires reads of the slot
    // about to be refilled (it held tile kt-1).
    cp_async_wait<T::Stages - 2>();
    __syncthreads();
    if (kt + T::Stages - 1 < k_tiles) load_stage(write_stage, k_begin + (kt + T::Stages - 1) * T::BK);
    cp_async_commit();

    const u32 a_tile = read_stage * S::kStageBytes, b_tile = a_tile + S::kABytes;
    load_a_fragments<T::kInput, T::AKMajor, typename S::ATile>(fa[0], a_tile, a_at, 0);
    load_b_fragments<T::kInput, T::BKMajor, typename S::BTile>(fb[0], b_tile, b_at, 0);
#pragma unroll
    for (int ks = 0; ks < S::kKSteps; ++ks) {
      // Fetch the next k-step's fragments while this one's mma.sync run.
      if (ks + 1 < S::kKSteps) {
        load_a_fragments<T::kInput, T::AKMajor, typename S::ATile>(fa[(ks + 1) & 1], a_tile, a_at, ks + 1);
        load_b_fragments<T::kInput, T::BKMajor, typename S::BTile>(fb[(ks + 1) & 1], b_tile, b_at, ks + 1);
      }
#pragma unroll
      for (int mi = 0; mi < S::kMI; ++mi)
#pragma unroll
        for (int ni = 0; ni < S::kNI; ++ni) mma<T::kInput>(acc[mi][ni], fa[ks & 1][mi], fb[ks & 1][ni]);
    }
    read_stage = read_stage + 1 == T::Stages ? 0 : read_stage + 1;
    write_stage = write_stage + 1 == T::Stages ? 0 : write_stage + 1;
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's shared memory becomes the epilogue's staging area

  // Epilogue: each warp moves one 16-row slab of its accumulators through shared memory at a time (each lane's pairs
  // of adjacent columns as 8-byte stores), then its lanes read the slab back along D's contiguous dimension and store
  // kVec elements per lane (a row-major D reads them as one vector: 8 lanes of 16 bytes cover one 128-byte line).
  const u32 slab = warp * 16 * S::kStagePitch * 4;  // byte offset of this warp's 16 × kStagePitch floats
  const auto at = [&](int r, int c) { return slab + static_cast<u32>((r * S::kStagePitch + c) * 4); };
  // A column-major D stages the slab transposed instead (a column's 16 rows contiguous), its 16-byte chunks
  // XOR-swizzled within each 128-byte line (a pair of columns) by the pair's index: the 32 lanes of each scalar
  // store then reach 32 banks, and 8 lanes reading a chunk each cover one line.
  const auto at_transposed = [&](int r, int c) {
    const int line = c >> 1, chunk = ((c & 1) * 4 + (r >> 2)) ^ ((line * 2) & 7);
    return slab + static_cast<u32>(((line * 8 + chunk) * 4 + (r & 3)) * 4);
  };
  constexpr bool kTransposed = T::SplitK == 1 && !T::DRowMajor;
  const int g = lane >> 2, t = lane & 3;
  constexpr int kVec = T::SplitK > 1 ? 1 : T::AlignC;
  // Up to 4 floats per lane read back (16-bit outputs aligned for 8 store 4 at a time: 8 bytes per lane, still
  // coalesced).
  constexpr int kRead = kVec < 4 ? kVec : 4;
#pragma unroll
  for (int mi = 0; mi < S::kMI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < S::kNI; ++ni) {
      if constexpr (kTransposed) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          st_shared<float>(at_transposed(g + (i >> 1) * 8, ni * 8 + t * 2 + (i & 1)), acc[mi][ni][i]);
      } else {
        st_shared(at(g, ni * 8 + t * 2), Vector<float, 2>{{acc[mi][ni][0], acc[mi][ni][1]}});
        st_shared(at(g + 8, ni * 8 + t * 2), Vector<float, 2>{{acc[mi][ni][2], acc[mi][ni][3]}});
      }
    }
    syncwarp();
    const int row_base = m0 + warp_row + mi * 16, col_base = n0 + warp_col;
    if constexpr (T::SplitK > 1) {
      for (int s = lane; s < 16 * T::WN; s += 32) {
        const int r = s / T::WN, c = s % T::WN;
        if (row_base + r < p.m && col_base + c < p.n)
          st_global(workspace_element(p, split, row_base + r, col_base + c, batch), ld_shared<float>(at(r, c)));
      }
    } else if constexpr (T::DRowMajor) {
      constexpr int kPerRow = T::WN / kRead;
      for (int s = lane; s < 16 * kPerRow; s += 32) {
        const int r = s / kPerRow, c = (s % kPerRow) * kRead;
        const i64 m = row_base + r, n = col_base + c;
        if (m >= p.m || n >= p.n) continue;
        const int valid = p.n - n < kRead ? static_cast<int>(p.n - n) : kRead;
        const Vector<float, kRead> slab_values = ld_shared<Vector<float, kRead>>(at(r, c));
        float values[kRead];
#pragma unroll
        for (int i = 0; i < kRead; ++i) values[i] = i < valid ? Epi::apply(slab_values.v[i], m, n + i, batch, p) : 0.0f;
        store_d<typename T::Out, true, kRead>(p, m, n, batch, values, valid);
      }
    } else {
      constexpr int kPerCol = 16 / kRead;
      for (int s = lane; s < T::WN * kPerCol; s += 32) {
        const int c = s / kPerCol, r = (s % kPerCol) * kRead;
        const i64 m = row_base + r, n = col_base + c;
        if (m >= p.m || n >= p.n) continue;
        const int valid = p.m - m < kRead ? static_cast<int>(p.m - m) : kRead;
        const Vector<float, kRead> slab_values = ld_shared<Vector<float, kRead>>(at_transposed(r, c));
        float values[kRead];
#pragma unroll
        for (int i = 0; i < kRead; ++i) values[i] = i < valid ? Epi::apply(slab_values.v[i], m + i, n, batch, p) : 0.0f;
        store_d<typename T::Out, false, kRead>(p, m, n, batch, values, valid);
      }
    }
    syncwarp();
  }
}

}  // namespace tessera
