// Global→shared copies of one operand tile for one pipeline stage, as 16-byte chunks of the tile's contiguous
// dimension. Edges are predicated chunk by chunk (zero-filled), so any M, N, K works; kAlign (elements the
// arguments guarantee) picks 16-, 8- or 4-byte cp.async, or synchronous 2-byte copies for unaligned 16-bit data.
#pragma once

#include "tessera/arch.cuh"

namespace tessera {

template <class E, int kAlign>
TESSERA_DEVICE void copy_chunk(u32 dst, const E* src, int valid) {
  constexpr int kChunkElems = 16 / static_cast<int>(sizeof(E));
  constexpr int kBytes = kAlign * static_cast<int>(sizeof(E));
  if constexpr (kBytes == 16) {
    cp_async_16(dst, src, valid * static_cast<int>(sizeof(E)));
  } else if constexpr (kBytes >= 4) {
#pragma unroll
    for (int j = 0; j < 16 / kBytes; ++j) {
      int v = valid - j * kAlign;
      v = v < 0 ? 0 : (v > kAlign ? kAlign : v);
      const E* s = v > 0 ? src + j * kAlign : src;
      if constexpr (kBytes == 8)
        cp_async_8(dst + j * kBytes, s, v * static_cast<int>(sizeof(E)));
      else
        cp_async_4(dst + j * kBytes, s, v * static_cast<int>(sizeof(E)));
    }
  } else {
    // 2-byte alignment: cp.async has no 2-byte form. The stage being filled is not read until after the next
    // barrier, so plain stores are as safe as the asynchronous copies.
    const u16* s = reinterpret_cast<const u16*>(src);
#pragma unroll
    for (int j = 0; j < kChunkElems; ++j) st_shared<u16>(dst + 2 * j, j < valid ? ld_global(s + j) : u16(0));
  }
}

// The tile is kRows × kCols elements (kCols contiguous, both in global memory and in shared memory), laid out by
// Tile (a SwizzledTile) from shared offset `tile`; element (r, c) is at global + r * row_stride + c. Rows at or beyond
// rows_valid and columns at or beyond cols_valid read as zero.
template <class E, int kRows, int kCols, int kThreads, int kAlign, class Tile>
struct TileLoader {
  static constexpr int kChunkElems = 16 / static_cast<int>(sizeof(E));
  static constexpr int kChunksPerRow = kCols / kChunkElems;
  static constexpr int kChunks = kRows * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "validate() guarantees whole chunks per thread");

  TESSERA_DEVICE static void load(u32 tile, const E* global, i64 row_stride, int rows_valid, int cols_valid, int tid) {
#pragma unroll
    for (int i = 0; i < kChunks / kThreads; ++i) {
      const int chunk = tid + i * kThreads;
      const int r = chunk / kChunksPerRow;
      const int c = (chunk % kChunksPerRow) * kChunkElems;
      int valid = cols_valid - c;
      valid = r >= rows_valid || valid < 0 ? 0 : (valid > kChunkElems ? kChunkElems : valid);
      const int offset = Tile::offset(r, c * static_cast<int>(sizeof(E)));
      const E* src = valid > 0 ? global + r * row_stride + c : global;
      copy_chunk<E, kAlign>(tile + offset, src, valid);
    }
  }
};

// The same copies for a tile loaded once per k-tile from a moving base: what does not change between k-tiles is
// computed once. When the threads cover whole rows in each pass and a pass spans whole swizzle periods, a thread's
// chunks share one column and one swizzle key, so the i-th sits a constant number of rows below the first: its
// shared offset and its global offset follow from the first by constant steps (no per-chunk division, swizzle or
// 64-bit multiply in the main loop). Other shapes fall back to TileLoader's per-chunk arithmetic.
template <class E, int kRows, int kCols, int kThreads, int kAlign, class Tile>
struct TileIterator {
  using Loader = TileLoader<E, kRows, kCols, kThreads, kAlign, Tile>;
  static constexpr int kChunkElems = Loader::kChunkElems;
  static constexpr int kChunksPerRow = Loader::kChunksPerRow;
  static constexpr int kPasses = Loader::kChunks / kThreads;
  static constexpr int kRowStep = kThreads % kChunksPerRow == 0 ? kThreads / kChunksPerRow : 0;
  static constexpr bool kRegular = kRowStep > 0 && kRowStep % (8 * Tile::kRowsPerLine) == 0;
  static constexpr int kSharedStep = kRowStep * kCols * static_cast<int>(sizeof(E));

  int first_row = 0, column = 0;
  u32 first_offset = 0;
  i64 first_element = 0, row_step = 0;

  TESSERA_DEVICE TileIterator(i64 row_stride, int tid) {
    if constexpr (kRegular) {
      first_row = tid / kChunksPerRow;
      column = (tid % kChunksPerRow) * kChunkElems;
      int offset = Tile::offset(first_row, column * static_cast<int>(sizeof(E)));
      keep_computed(offset);
      first_offset = static_cast<u32>(offset);
      first_element = first_row * row_stride + column;
      row_step = kRowStep * row_stride;
    }
  }

  // As TileLoader::load, from `global` (the tile's element (0, 0)) into the shared tile at `tile`.
  TESSERA_DEVICE void load(u32 tile, const E* global, i64 row_stride, int rows_valid, int cols_valid, int tid) const {
    if constexpr (!kRegular) {
      Loader::load(tile, global, row_stride, rows_valid, cols_valid, tid);
    } else {
      int in_row = cols_valid - column;  // the same for every pass: one column
      in_row = in_row < 0 ? 0 : (in_row > kChunkElems ? kChunkElems : in_row);
      const E* src = global + first_element;
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        const int valid = first_row + i * kRowStep < rows_valid ? in_row : 0;
        copy_chunk<E, kAlign>(tile + first_offset + i * kSharedStep, valid > 0 ? src : global, valid);
        src += row_step;
      }
    }
  }
};

}  // namespace tessera
