// The Hopper tensor-core GEMM (sm_90a), warp-specialised as CUTLASS 3's: a producer warpgroup whose one thread
// streams A and B tiles with TMA into a Stages-deep ring of 128-byte-swizzled shared tiles, each stage guarded by a
// `full` mbarrier (the copies' bytes) and an `empty` one (its readers' release); BM/64 consumer warpgroups, each
// computing 64 rows x BN with wgmma.mma_async straight from the shared tiles, keeping one k-tile's MMAs in flight
// while they wait for the next, and releasing a stage once the MMAs that read it have retired. The epilogue goes
// through shared memory like the mma.sync kernel's, and out by TMA stores where T::TmaStore (row-major D). tf32
// operands K-major; 16-bit operands in either layout: a K-major tile is block_k wide (its 128-byte rows along K), an
// M/N-major one is loaded as 64-wide slices of M (N), each block_k rows of K, which wgmma reads with its transpose bit.
// The tiles' edges beyond M, N and K are TMA's zeros. Grid: x = rasterised output tiles, z = batch (x split); stream-K:
// one row of blocks (of clusters) sharing the (tile, k-tile) iterations. Clusters (ClusterM x ClusterN blocks,
// consecutive along x, as CUTLASS 3's): blocks of a cluster column share their B tile and blocks of a cluster row their
// A tile; each loads its part of a shared tile once from L2 and multicasts it to the blocks that share it, and releases
// every stage to all the blocks that write into it.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/block/epilogue_store.cuh"
#include "tessera/block/raster.cuh"
#include "tessera/block/stream_k.cuh"
#include "tessera/gemm/gemm_params.cuh"
#include "tessera/warp/mma_fragments.cuh"

namespace tessera {

// T supplies: Element, Out, kInput (f16, bf16, tf32), BM (64 or 128), BN (64, 128 or 256), BK (64), Stages, Swizzle,
// AlignC, AKMajor, BKMajor, DRowMajor, TmaStore, ClusterM, ClusterN (1 or 2).
template <class T>
struct WgmmaShape {
  static constexpr int kConsumers = T::BM / 64;  // consumer warpgroups
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr u32 kElem = sizeof(typename T::Element);
  static constexpr u32 kABytes = T::BM * T::BK * kElem, kBBytes = T::BN * T::BK * kElem;
  static constexpr u32 kStageBytes = kABytes + kBBytes;  // a multiple of 1024: each tile starts a swizzle atom
  static constexpr u32 kFull = T::Stages * kStageBytes;  // Stages full barriers, then Stages empty ones
  static constexpr u32 kEmpty = kFull + 8 * T::Stages;
  // A 128-byte-swizzled tile: atoms of 8 rows of 128 bytes, 1024 bytes apart; an M/N-major tile's 64-wide slices of
  // M (N) (64 x BK elements each) follow one another.
  static constexpr u32 kGroupBytes = 1024;
  static constexpr u32 kSliceBytes = 64 * T::BK * kElem;
  // Rank r of a cluster computes tile (r % ClusterM, r / ClusterM) of the cluster's ClusterM x ClusterN tiles.
  static constexpr int kCluster = T::ClusterM * T::ClusterN;
  // Arrivals that empty a stage: one per consumer warpgroup of each block writing into it (its cluster row and
  // column, itself among them).
  static constexpr int kReleases = kConsumers * (T::ClusterM + T::ClusterN - 1);
};

// The cluster's blocks that share this block's A tile (its cluster row: the same tile_m) and its B tile (its
// column: the same tile_n), as masks of ranks.
template <class T>
TESSERA_DEVICE u16 a_sharers(u32 rank) {
  u16 mask = 0;
  for (int j = 0; j < T::ClusterN; ++j) mask |= static_cast<u16>(1u << (rank % T::ClusterM + T::ClusterM * j));
  return mask;
}
template <class T>
TESSERA_DEVICE u16 b_sharers(u32 rank) {
  u16 mask = 0;
  for (int i = 0; i < T::ClusterM; ++i) mask |= static_cast<u16>(1u << (i + T::ClusterM * (rank / T::ClusterM)));
  return mask;
}

// Shared-memory descriptors of the k-th step of a tile starting at `tile` (16 deep, 8 for tf32): K-major, the step is
// 32 bytes along each row; M/N-major (16-bit only), 16 rows (two 1024-byte atoms) further.
template <class T, bool kKMajor>
TESSERA_DEVICE unsigned long long wgmma_operand(u32 tile, int ks) {
  using S = WgmmaShape<T>;
  return kKMajor ? wgmma_descriptor(tile + ks * 32, 16, S::kGroupBytes, kWgmma128B)
                 : wgmma_descriptor(tile + ks * 16 * 128, S::kSliceBytes, S::kGroupBytes, kWgmma128B);
}

// Part `part` of kParts of one operand's tile of a stage by TMA, to every block in `sharers` (kParts > 1: the blocks
// sharing the tile load one part each): K-major, a box of BK x rows / kParts (128-byte rows, so a part starts an
// atom); M/N-major, its share of the rows / 64 boxes of 64 x BK.
template <class T, bool kKMajor, int kRows, int kParts>
TESSERA_DEVICE void load_operand(u32 tile, const TmaDescriptor* map, int kt, int row0, int batch, u32 full, int part,
                                 u16 sharers) {
  const auto load = [&](u32 dst, int x, int y) {
    if constexpr (kParts == 1)
      tma_load_3d(dst, map, x, y, batch, full);
    else
      tma_load_3d_multicast(dst, map, x, y, batch, full, sharers);
  };
  if constexpr (kKMajor) {
    constexpr int kPartRows = kRows / kParts;
    load(tile + static_cast<u32>(part * kPartRows * 128), kt * T::BK, row0 + part * kPartRows);
  } else {
    constexpr int kSlices = kRows / 64 / kParts;
#pragma unroll
    for (int i = 0; i < kSlices; ++i) {
      const int slice = part * kSlices + i;
      load(tile + slice * WgmmaShape<T>::kSliceBytes, row0 + slice * 64, kt * T::BK);
    }
  }
}

// The m64nBNk16 (k8 for tf32) MMA of the element type, into a consumer's BN/2 accumulators.
template <class T>
TESSERA_DEVICE void wgmma_step(float (&d)[T::BN / 2], unsigned long long a, unsigned long long b) {
  constexpr int kInput = T::kInput == kInputTf32 ? kWgmmaTf32 : T::kInput == kInputBf16 ? kWgmmaBf16 : kWgmmaF16;
  wgmma<kInput, T::BN, T::AKMajor ? 0 : 1, T::BKMajor ? 0 : 1>(d, a, b, 1);
}

// The ring's barriers: a `full` one per stage (the producer's copies land) and an `empty` one (its readers retire).
template <class T>
TESSERA_DEVICE u32 wgmma_full(int stage) {
  return WgmmaShape<T>::kFull + 8u * static_cast<u32>(stage);
}
template <class T>
TESSERA_DEVICE u32 wgmma_empty(int stage) {
  return WgmmaShape<T>::kEmpty + 8u * static_cast<u32>(stage);
}

template <class T>
TESSERA_DEVICE void wgmma_init_ring() {
  using S = WgmmaShape<T>;
  if (threadIdx.x == 0) {
    for (int s = 0; s < T::Stages; ++s) {
      mbarrier_init(wgmma_full<T>(s), 1);
      mbarrier_init(wgmma_empty<T>(s), S::kReleases);
    }
    fence_barrier_init();
  }
  // A cluster's blocks multicast into and arrive on one another's barriers: all initialised before any use.
  if constexpr (S::kCluster > 1)
    cluster_sync();
  else
    __syncthreads();
}

// A consumer warpgroup whose MMAs reading `stage` have retired gives it back: its first thread arrives on the
// stage's empty barrier in every block that writes into this one (the MMAs read on the warpgroup's behalf).
template <class T>
TESSERA_DEVICE void wgmma_release(int stage) {
  using S = WgmmaShape<T>;
  if (threadIdx.x % 128 != 0) return;
  if constexpr (S::kCluster == 1) {
    mbarrier_arrive(wgmma_empty<T>(stage));
  } else {
    const u32 rank = cluster_rank();
    const u16 writers = a_sharers<T>(rank) | b_sharers<T>(rank);
#pragma unroll
    for (int r = 0; r < S::kCluster; ++r)
      if (writers >> r & 1) mbarrier_arrive_cluster(wgmma_empty<T>(stage), static_cast<u32>(r));
  }
}

// One output tile over k-tiles [kt_begin, kt_begin + k_tiles) into the consumers' accumulators d. `ring` counts the
// k-tiles the block's ring has carried before this call (a stream-K block runs several tiles through one ring): the
// k-tile's stage and the barriers' phase follow from it. Ends with every MMA retired and every stage released.
template <class T>
TESSERA_DEVICE void wgmma_accumulate(const GemmParams& p, int tile_m, int tile_n, int batch, int kt_begin, int k_tiles,
                                     i64 ring, float (&d)[T::BN / 2]) {
  using S = WgmmaShape<T>;
  const int tid = threadIdx.x, warpgroup = tid / 128;
  if (warpgroup == 0) {
    // Producer: one thread issues every copy. (No setmaxnreg: the consumers need about 90 registers at 128 x 128,
    // within the even share of any block size here.)
    if (tid == 0) {
      const u32 rank = S::kCluster > 1 ? cluster_rank() : 0u;
      const int part_a = static_cast<int>(rank / T::ClusterM), part_b = static_cast<int>(rank % T::ClusterM);
      for (int kt = 0; kt < k_tiles; ++kt) {
        const i64 g = ring + kt;
        const int s = static_cast<int>(g % T::Stages);
        const u32 phase = static_cast<u32>(g / T::Stages) & 1u;
        mbarrier_wait(wgmma_empty<T>(s), phase ^ 1u);  // a fresh barrier's parity-1 phase counts as complete
        // The whole stage lands here: this block's parts and its sharers'.
        mbarrier_arrive_expect_tx(wgmma_full<T>(s), S::kStageBytes);
        const u32 tile = static_cast<u32>(s) * S::kStageBytes;
        load_operand<T, T::AKMajor, T::BM, T::ClusterN>(tile, &p.a_map, kt_begin + kt, tile_m * T::BM, batch,
                                                        wgmma_full<T>(s), part_a, a_sharers<T>(rank));
        load_operand<T, T::BKMajor, T::BN, T::ClusterM>(tile + S::kABytes, &p.b_map, kt_begin + kt, tile_n * T::BN,
                                                        batch, wgmma_full<T>(s), part_b, b_sharers<T>(rank));
      }
      // In a cluster, the block stays until every block it shares with has released every stage: their arrivals
      // on its barriers must not outlive it.
      if constexpr (S::kCluster > 1)
        for (int kt = k_tiles; kt < k_tiles + T::Stages; ++kt) {
          const i64 g = ring + kt;
          mbarrier_wait(wgmma_empty<T>(static_cast<int>(g % T::Stages)), (static_cast<u32>(g / T::Stages) & 1u) ^ 1u);
        }
    }
  } else {
    const u32 a_rows = static_cast<u32>(warpgroup - 1) * S::kSliceBytes;  // this consumer's 64 rows of the A tile
#pragma unroll
    for (int i = 0; i < T::BN / 2; ++i) d[i] = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const i64 g = ring + kt;
      const int s = static_cast<int>(g % T::Stages);
      mbarrier_wait(wgmma_full<T>(s), static_cast<u32>(g / T::Stages) & 1u);
      const u32 tile = static_cast<u32>(s) * S::kStageBytes;
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)  // 128-byte rows, 32 bytes of K per instruction
        wgmma_step<T>(d, wgmma_operand<T, T::AKMajor>(tile + a_rows, ks),
                      wgmma_operand<T, T::BKMajor>(tile + S::kABytes, ks));
      wgmma_commit();
      // This k-tile's MMAs stay in flight; the previous one's have retired, so its stage goes back to the producer.
      wgmma_wait<1>();
      if (kt > 0) wgmma_release<T>(static_cast<int>((g - 1) % T::Stages));
    }
    wgmma_wait<0>();
    if (k_tiles > 0) wgmma_release<T>(static_cast<int>((ring + k_tiles - 1) % T::Stages));
  }
  // Every MMA has retired and every copy landed: the ring becomes the epilogue's staging area.
  __syncthreads();
}

// The consumers' epilogue: each warp's 16 rows through its slab of shared memory to D (with the partial sums of
// workspace slots 0 .. pieces − 1 added; by TMA where T::TmaStore) or raw to workspace slot `slot` (kToWorkspace).
template <class T, class Epi, int kOutput>
TESSERA_DEVICE void wgmma_store(const GemmParams& p, const float (&d)[T::BN / 2], int tile_m, int tile_n, int batch,
                                int slot, int pieces = 0) {
  const int tid = threadIdx.x;
  if (tid < 128) return;
  const int warp = tid / 32 - 4, lane = tid & 31;  // consumer warps 0..4*kConsumers-1, 16 rows each
  const auto& fragments = reinterpret_cast<const float(&)[T::BN / 8][4]>(d);
  const i64 row_base = static_cast<i64>(tile_m) * T::BM + warp * 16, col_base = static_cast<i64>(tile_n) * T::BN;
  if constexpr (T::TmaStore && kOutput == kToD) {
    const u32 staging = static_cast<u32>(warp) * 16 * T::BN * static_cast<u32>(sizeof(typename T::Out));
    store_warp_rows_by_tma<T, Epi, T::BN>(p, fragments, staging, lane, row_base, col_base, batch, pieces);
  } else {
    const u32 slab = static_cast<u32>(warp) * 16 * kSlabPitch<T::BN> * 4;
    store_warp_slab<T, Epi, kOutput, T::BN>(p, fragments, slab, lane, row_base, col_base, batch, slot, pieces);
  }
}

template <class T, class Epi>
TESSERA_DEVICE void gemm_wgmma(const GemmParams& p) {
  using S = WgmmaShape<T>;
  int tile_m, tile_n;
  if constexpr (S::kCluster == 1) {
    raster_tile<T::Swizzle>(blockIdx.x, (p.m + T::BM - 1) / T::BM, (p.n + T::BN - 1) / T::BN, tile_m, tile_n);
  } else {
    // Clusters are rasterised as tiles are, each covering ClusterM x ClusterN tiles; a block past D's edge still
    // loads and multicasts its parts (TMA's zeros) for its sharers and stores nothing.
    const int tiles_m = (p.m + T::BM - 1) / T::BM, tiles_n = (p.n + T::BN - 1) / T::BN;
    int cluster_m, cluster_n;
    raster_tile<T::Swizzle>(static_cast<int>(blockIdx.x) / S::kCluster, (tiles_m + T::ClusterM - 1) / T::ClusterM,
                            (tiles_n + T::ClusterN - 1) / T::ClusterN, cluster_m, cluster_n);
    const int rank = static_cast<int>(cluster_rank());
    tile_m = cluster_m * T::ClusterM + rank % T::ClusterM;
    tile_n = cluster_n * T::ClusterN + rank / T::ClusterM;
  }
  // z = batch x split: a split's K range is whole k-tiles (k_per_split a multiple of BK), so its TMA boxes never
  // reach into the next split's, and the last split's boxes past K are TMA's zeros.
  const int batch = static_cast<int>(blockIdx.z) / T::SplitK, split = static_cast<int>(blockIdx.z) % T::SplitK;
  const int k_begin = split * p.k_per_split;
  const int k_end = p.k < k_begin + p.k_per_split ? p.k : k_begin + p.k_per_split;
  const int k_tiles = k_end > k_begin ? (k_end - k_begin + T::BK - 1) / T::BK : 0;
  wgmma_init_ring<T>();
  float d[T::BN / 2];
  wgmma_accumulate<T>(p, tile_m, tile_n, batch, k_begin / T::BK, k_tiles, 0, d);
  // Split K: raw partial sums to the split's workspace slice; splitk_reduce applies the epilogue.
  if constexpr (T::SplitK > 1)
    wgmma_store<T, Epi, kToWorkspace>(p, d, tile_m, tile_n, batch, split);
  else
    wgmma_store<T, Epi, kToD>(p, d, tile_m, tile_n, batch, -1);
}

// Stream-K on the Hopper kernel (tessera/block/stream_k.cuh): one ring of stages carries all of a block's k-tiles.
// In a cluster, the peers walk the same k-tiles of their cluster tile, so every piece's copies multicast as a
// whole tile's do.
template <class T, class Epi>
TESSERA_DEVICE void gemm_wgmma_stream_k(const GemmParams& p) {
  wgmma_init_ring<T>();
  i64 ring = 0;
  stream_k_for_each_piece<T::BM, T::BN, T::Swizzle, T::ClusterM, T::ClusterN>(p, [&](const StreamKPiece& piece) {
    float d[T::BN / 2];
    wgmma_accumulate<T>(p, piece.tile_m, piece.tile_n, piece.batch, piece.first, piece.last - piece.first, ring, d);
    ring += piece.last - piece.first;
    stream_k_hand_over(
        p, piece,
        [&](int slot) { wgmma_store<T, Epi, kToWorkspace>(p, d, piece.tile_m, piece.tile_n, piece.batch, slot); },
        [&](int pieces) { wgmma_store<T, Epi, kToD>(p, d, piece.tile_m, piece.tile_n, piece.batch, -1, pieces); });
    fence_proxy_async();  // the epilogue's writes to the ring before the next piece's TMA loads overwrite it
  });
}

}  // namespace tessera
