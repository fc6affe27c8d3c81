// The Ampere-class tensor-core GEMM: a block computes a BM×BN tile of D with warps of WM×WN, through a
// Stages-deep ring of cp.async copies into XOR-swizzled shared memory, ldmatrix fragment loads double-buffered in
// registers, and mma.sync; the epilogue goes through shared memory so that D is written with coalesced vector
// stores. Grid: x = rasterised output tiles, z = batch × split_k.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/block/epilogue_store.cuh"
#include "tessera/block/raster.cuh"
#include "tessera/block/stream_k.cuh"
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
  // tf32 M/N-contiguous operands are read with 32-bit loads across rows (no ldmatrix.trans for 32-bit elements).
  using ATile = SwizzledTile<kACols * kElem, T::kInput == kInputTf32 && !T::AKMajor>;
  using BTile = SwizzledTile<kBCols * kElem, T::kInput == kInputTf32 && !T::BKMajor>;
  static constexpr int kABytes = T::BM * T::BK * kElem;
  static constexpr int kBBytes = T::BN * T::BK * kElem;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kStagePitch = kSlabPitch<T::WN>;
};

// What a thread computes once per kernel, whatever tiles it goes on to: its place in the block, its copy offsets
// and its fragment offsets.
template <class T>
struct TensorOpThread {
  using S = TensorOpShape<T>;
  using E = typename S::E;
  int tid, lane, warp, warp_row, warp_col;
  i64 a_stride, b_stride;
  TileIterator<E, S::kARows, S::kACols, S::kThreads, T::AlignA, typename S::ATile> a_copies;
  TileIterator<E, S::kBRows, S::kBCols, S::kThreads, T::AlignB, typename S::BTile> b_copies;
  FragmentOffsets<T::kInput, T::AKMajor, typename S::ATile, S::kMI, S::kKSteps, true> a_at;
  FragmentOffsets<T::kInput, T::BKMajor, typename S::BTile, S::kNI, S::kKSteps, false> b_at;

  TESSERA_DEVICE explicit TensorOpThread(const GemmParams& p)
      : tid(threadIdx.x),
        lane(tid & 31),
        warp(tid >> 5),
        warp_row((warp / S::kWarpsN) * T::WM),
        warp_col((warp % S::kWarpsN) * T::WN),
        a_stride(T::AKMajor ? p.a.rs : p.a.cs),
        b_stride(T::BKMajor ? p.b.cs : p.b.rs),
        a_copies(a_stride, tid),
        b_copies(b_stride, tid),
        a_at(warp_row, lane),
        b_at(warp_col, lane) {}
};

// A warp's accumulators: kMI x kNI mma.sync C fragments.
template <class T>
using TensorOpAcc = float[TensorOpShape<T>::kMI][TensorOpShape<T>::kNI][4];

// One output tile's sums over K elements [k_begin, k_end) into acc: the cp.async ring and the mma.sync steps. Ends
// with the ring drained and a barrier, its shared memory free for the epilogue.
template <class T>
TESSERA_DEVICE void tensorop_accumulate(const GemmParams& p, const TensorOpThread<T>& me, int tile_m, int tile_n,
                                        int batch, int k_begin, int k_end, TensorOpAcc<T>& acc) {
  using S = TensorOpShape<T>;
  using E = typename S::E;
  const int tid = me.tid;
  const int m0 = tile_m * T::BM, n0 = tile_n * T::BN;
  const int k_tiles = k_end > k_begin ? (k_end - k_begin + T::BK - 1) / T::BK : 0;

  const E* a = static_cast<const E*>(p.a.data) + batch * p.a.bs;
  const E* b = static_cast<const E*>(p.b.data) + batch * p.b.bs;

  // One stage: A then B, each addressed as (row, contiguous column) of its shared tile; each thread's copy offsets
  // are set up once for the whole K loop.
  const i64 a_stride = me.a_stride, b_stride = me.b_stride;
  const auto& a_copies = me.a_copies;
  const auto& b_copies = me.b_copies;
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
  const auto& a_at = me.a_at;
  const auto& b_at = me.b_at;
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
}

// The epilogue: each warp moves one 16-row slab of its accumulators at a time through its part of shared memory,
// to D (kToD, with the partial sums of workspace slots 0 .. pieces − 1 added) or raw to workspace slot `slot`
// (kToWorkspace).
template <class T, class Epi, int kOutput>
TESSERA_DEVICE void tensorop_store(const GemmParams& p, const TensorOpThread<T>& me, const TensorOpAcc<T>& acc,
                                   int tile_m, int tile_n, int batch, int slot, int pieces = 0) {
  using S = TensorOpShape<T>;
  const u32 slab = me.warp * 16 * S::kStagePitch * 4;
#pragma unroll
  for (int mi = 0; mi < S::kMI; ++mi)
    store_warp_slab<T, Epi, kOutput, T::WN>(p, acc[mi], slab, me.lane, tile_m * T::BM + me.warp_row + mi * 16,
                                            tile_n * T::BN + me.warp_col, batch, slot, pieces);
}

// The data-parallel kernel: a block per output tile (rasterised for L2 reuse) and K split.
template <class T, class Epi>
TESSERA_DEVICE void gemm_tensorop(const GemmParams& p) {
  int tile_m, tile_n;
  raster_tile<T::Swizzle>(blockIdx.x, (p.m + T::BM - 1) / T::BM, (p.n + T::BN - 1) / T::BN, tile_m, tile_n);
  const int batch = blockIdx.z / T::SplitK, split = blockIdx.z % T::SplitK;
  const int k_begin = split * p.k_per_split;
  const int k_end = p.k < k_begin + p.k_per_split ? p.k : k_begin + p.k_per_split;
  const TensorOpThread<T> me(p);
  TensorOpAcc<T> acc;
  tensorop_accumulate<T>(p, me, tile_m, tile_n, batch, k_begin, k_end, acc);
  tensorop_store<T, Epi, (T::SplitK > 1 ? kToWorkspace : kToD)>(p, me, acc, tile_m, tile_n, batch, split);
}

// Stream-K (tessera/block/stream_k.cuh): each piece of the block's range through the pipeline, then handed over.
template <class T, class Epi>
TESSERA_DEVICE void gemm_tensorop_stream_k(const GemmParams& p) {
  const TensorOpThread<T> me(p);
  stream_k_for_each_piece<T::BM, T::BN, T::Swizzle>(p, [&](const StreamKPiece& piece) {
    const i64 k_end = static_cast<i64>(piece.last) * T::BK < p.k ? static_cast<i64>(piece.last) * T::BK : p.k;
    TensorOpAcc<T> acc;
    tensorop_accumulate<T>(p, me, piece.tile_m, piece.tile_n, piece.batch, piece.first * T::BK, static_cast<int>(k_end),
                           acc);
    stream_k_hand_over(
        p, piece,
        [&](int slot) {
          tensorop_store<T, Epi, kToWorkspace>(p, me, acc, piece.tile_m, piece.tile_n, piece.batch, slot);
        },
        [&](int pieces) {
          tensorop_store<T, Epi, kToD>(p, me, acc, piece.tile_m, piece.tile_n, piece.batch, -1, pieces);
        });
  });
}

}  // namespace tessera
