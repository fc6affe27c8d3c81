// XOR-swizzled shared-memory tiles. A tile is `rows` rows of kRowBytes contiguous bytes, cut into 16-byte chunks;
// within each 128-byte line (8 chunks) a chunk's position is XORed with the line's key. Then the 8 row addresses of
// an ldmatrix (8 consecutive rows, same logical chunk) fall in 8 different 16-byte bank groups, and the 8 threads of
// a quarter-warp storing 16-byte chunks of one line also hit 8 different groups: no bank conflicts either way.
// (CuTe's Swizzle<3,4,3> for 128-byte rows; rows narrower than 128 bytes share a line and key off the line index.)
#pragma once

#include "tessera/platform.cuh"

namespace tessera {

//
// kPairKey: the key is (line & 3) << 1 instead, moving pairs of chunks. For tiles read with 32-bit loads across rows,
// as tf32 fragments of an M- or N-contiguous operand are (4 rows t of 8 consecutive floats g): rows 0..3 then fall
// in four different 32-byte pairs of banks where the line & 7 key put rows 0 and 1 (and 2 and 3) in the same pair.
template <int kRowBytes, bool kPairKey = false>
struct SwizzledTile {
  static_assert(kRowBytes % 16 == 0, "rows are whole 16-byte chunks");
  static constexpr int kChunksPerRow = kRowBytes / 16;
  static constexpr int kRowsPerLine = kChunksPerRow >= 8 ? 1 : 8 / kChunksPerRow;

  // Byte offset of (row, byte within the row).
  TESSERA_DEVICE static int offset(int row, int byte) {
    const int chunk = row * kChunksPerRow + (byte >> 4);
    const int key = kPairKey ? ((row / kRowsPerLine) & 3) << 1 : (row / kRowsPerLine) & 7;
    return (((chunk & ~7) | ((chunk & 7) ^ key)) << 4) | (byte & 15);
  }
};

}  // namespace tessera
