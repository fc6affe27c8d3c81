// Stream-K's schedule, shared by the tensor-core kernels: the grid's blocks share the (tile, k-tile) iterations
// evenly, block b taking [b·total/blocks, (b+1)·total/blocks) across tile boundaries. A tile shared by several
// blocks is finished by the one holding its last k-tiles: each block before it stores its piece's partial sums to
// workspace slot (block − the tile's first block) and counts it on the tile's flag; the finishing block waits for
// the count and its epilogue adds the pieces as it reads its own sums back from shared memory. No second kernel. A
// block walks its range backwards: the piece it stores for a later block is its first work, and the tile it
// finishes (the one its range starts in) its last, by when the blocks before it have stored theirs; so a block only
// waits on blocks numbered before it. In the hybrid with data-parallel tiles, only the first sk_shared_tiles tiles are
// shared so; after its share of them, block b runs the tiles sk_shared_tiles + b, + b + blocks, ... whole.
// Clusters (kClusterM x kClusterN blocks, consecutive along x): the schedule's units are clusters and cluster tiles
// (kClusterM x kClusterN tiles, rasterised as tiles are); rank r of a cluster takes tile (r % kClusterM,
// r / kClusterM) of each cluster tile over the same k-tiles as its peers, so that they share their multicast copies,
// and its own flag and pieces. sk_total counts (cluster tile, k-tile) iterations and sk_shared_tiles cluster tiles.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/block/raster.cuh"
#include "tessera/gemm/gemm_params.cuh"

namespace tessera {

TESSERA_DEVICE i64 stream_k_block_of(i64 iteration, i64 blocks, i64 total) {
  return ((iteration + 1) * blocks - 1) / total;
}

// One block's work on one tile: k-tiles [first, last) of its sk_k_tiles, `before` pieces stored by the tile's
// blocks before this one, and whether this block holds the tile's last k-tile (and so finishes it). `tile` indexes
// the tile's flag: the cluster tile's times the cluster's blocks, plus the rank.
struct StreamKPiece {
  i64 tile;
  int tile_m, tile_n, batch;
  int first, last, before;
  bool finishes;
};

// Calls piece_fn(piece) for each piece of this block's range, last first, then for each of its whole tiles, with a
// barrier after each (the next piece's copies reuse the shared memory the last one's epilogue read; in a cluster,
// the peers' multicasts write into it too).
template <int kBM, int kBN, int kSwizzle, int kClusterM = 1, int kClusterN = 1, class PieceFn>
TESSERA_DEVICE void stream_k_for_each_piece(const GemmParams& p, PieceFn piece_fn) {
  constexpr int kCluster = kClusterM * kClusterN;
  const i64 units = gridDim.x / kCluster, total = p.sk_total, k_tiles = p.sk_k_tiles, unit = blockIdx.x / kCluster;
  int rank = 0;
  if constexpr (kCluster > 1) rank = static_cast<int>(cluster_rank());
  const int tiles_m = (p.m + kBM - 1) / kBM, tiles_n = (p.n + kBN - 1) / kBN;
  const int units_m = (tiles_m + kClusterM - 1) / kClusterM, units_n = (tiles_n + kClusterN - 1) / kClusterN;
  const i64 per_batch = static_cast<i64>(units_m) * units_n;
  const auto place = [&](StreamKPiece& piece, i64 unit_tile) {
    int unit_m, unit_n;
    raster_tile<kSwizzle>(static_cast<int>(unit_tile % per_batch), units_m, units_n, unit_m, unit_n);
    piece.tile_m = unit_m * kClusterM + rank % kClusterM;
    piece.tile_n = unit_n * kClusterN + rank / kClusterM;
    piece.batch = static_cast<int>(unit_tile / per_batch);
    piece.tile = unit_tile * kCluster + rank;
  };
  const auto next_piece = [&] {
    if constexpr (kCluster > 1)
      cluster_sync();
    else
      __syncthreads();
  };
  const i64 begin = unit * total / units;
  for (i64 end = (unit + 1) * total / units; end > begin;) {
    StreamKPiece piece;
    const i64 unit_tile = (end - 1) / k_tiles, tile_begin = unit_tile * k_tiles;
    place(piece, unit_tile);
    piece.first = static_cast<int>((begin > tile_begin ? begin : tile_begin) - tile_begin);
    piece.last = static_cast<int>(end - tile_begin);
    piece.before = static_cast<int>(unit - stream_k_block_of(tile_begin, units, total));
    piece.finishes = piece.last == k_tiles;
    piece_fn(piece);
    next_piece();
    end = tile_begin + piece.first;
  }
  for (i64 unit_tile = p.sk_shared_tiles + unit; unit_tile < per_batch * p.batch; unit_tile += units) {
    StreamKPiece piece;
    place(piece, unit_tile);
    piece.first = 0, piece.last = static_cast<int>(k_tiles), piece.before = 0, piece.finishes = true;
    piece_fn(piece);
    next_piece();
  }
}

// A piece's sums leave the block: a piece for a later block to workspace slot `before` (store_piece) and counted on
// the tile's flag; a finished tile to D once the pieces before it are in (store_tile(pieces to add)).
template <class StorePiece, class StoreTile>
TESSERA_DEVICE void stream_k_hand_over(const GemmParams& p, const StreamKPiece& piece, StorePiece store_piece,
                                       StoreTile store_tile) {
  if (!piece.finishes) {
    store_piece(piece.before);
    threadfence();
    __syncthreads();
    if (threadIdx.x == 0) flag_release_add(p.tile_flags + piece.tile, 1);
    return;
  }
  if (piece.before > 0) {
    if (threadIdx.x == 0) flag_wait_at_least(p.tile_flags + piece.tile, piece.before);
    __syncthreads();
  }
  store_tile(piece.before);
}

}  // namespace tessera
