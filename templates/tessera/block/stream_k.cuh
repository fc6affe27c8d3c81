// Stream-K's schedule, shared by the tensor-core kernels: the grid's blocks share the (tile, k-tile) iterations
// evenly, block b taking [b·total/blocks, (b+1)·total/blocks) across tile boundaries. A tile shared by several
// blocks is finished by the one holding its last k-tiles: each block before it stores its piece's partial sums to
// workspace slot (block − the tile's first block) and counts it on the tile's flag; the finishing block waits for
// the count and its epilogue adds the pieces as it reads its own sums back from shared memory. No second kernel. A
// block walks its range backwards: the piece it stores for a later block is its first work, and the tile it
// finishes (the one its range starts in) its last, by when the blocks before it have stored theirs; so a block only
// waits on blocks numbered before it. In the hybrid with data-parallel tiles, only the first sk_shared_tiles tiles are
// shared so; after its share of them, block b runs the tiles sk_shared_tiles + b, + b + blocks, ... whole.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/block/raster.cuh"
#include "tessera/gemm/gemm_params.cuh"

namespace tessera {

TESSERA_DEVICE i64 stream_k_block_of(i64 iteration, i64 blocks, i64 total) {
  return ((iteration + 1) * blocks - 1) / total;
}

// One block's work on one tile: k-tiles [first, last) of its sk_k_tiles, `before` pieces stored by the tile's
// blocks before this one, and whether this block holds the tile's last k-tile (and so finishes it).
struct StreamKPiece {
  i64 tile;
  int tile_m, tile_n, batch;
  int first, last, before;
  bool finishes;
};

// Calls piece_fn(piece) for each piece of this block's range, last first, then for each of its whole tiles, with a
// barrier after each (the next piece's copies reuse the shared memory the last one's epilogue read).
template <int kBM, int kBN, int kSwizzle, class PieceFn>
TESSERA_DEVICE void stream_k_for_each_piece(const GemmParams& p, PieceFn piece_fn) {
  const i64 blocks = gridDim.x, total = p.sk_total, k_tiles = p.sk_k_tiles, block = blockIdx.x;
  const int tiles_m = (p.m + kBM - 1) / kBM, tiles_n = (p.n + kBN - 1) / kBN;
  const i64 per_batch = static_cast<i64>(tiles_m) * tiles_n;
  const i64 begin = block * total / blocks;
  for (i64 end = (block + 1) * total / blocks; end > begin;) {
    StreamKPiece piece;
    piece.tile = (end - 1) / k_tiles;
    const i64 tile_begin = piece.tile * k_tiles;
    piece.first = static_cast<int>((begin > tile_begin ? begin : tile_begin) - tile_begin);
    piece.last = static_cast<int>(end - tile_begin);
    raster_tile<kSwizzle>(static_cast<int>(piece.tile % per_batch), tiles_m, tiles_n, piece.tile_m, piece.tile_n);
    piece.batch = static_cast<int>(piece.tile / per_batch);
    piece.before = static_cast<int>(block - stream_k_block_of(tile_begin, blocks, total));
    piece.finishes = piece.last == k_tiles;
    piece_fn(piece);
    __syncthreads();
    end = tile_begin + piece.first;
  }
  for (i64 tile = p.sk_shared_tiles + block; tile < per_batch * p.batch; tile += blocks) {
    StreamKPiece piece;
    piece.tile = tile;
    piece.first = 0, piece.last = static_cast<int>(k_tiles), piece.before = 0, piece.finishes = true;
    raster_tile<kSwizzle>(static_cast<int>(tile % per_batch), tiles_m, tiles_n, piece.tile_m, piece.tile_n);
    piece.batch = static_cast<int>(tile / per_batch);
    piece_fn(piece);
    __syncthreads();
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
