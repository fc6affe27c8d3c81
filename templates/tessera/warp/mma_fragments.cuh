// Warp-level mma.sync operand fragments, loaded from XOR-swizzled shared-memory tiles with ldmatrix (or 32-bit loads
// for tf32 that must be transposed), for any warp tile and either majorness of each operand, and the mma.sync step
// itself. GEMM's tensor-core kernel uses them; attention's Q·Kᵀ (K as a K-major B) and P·V (V as an N-major B) can.
// Fragment layouts as the PTX ISA gives them (ANCHORS.md).
#pragma once

#include "tessera/arch.cuh"

namespace tessera {

enum InputKind { kInputF16, kInputBf16, kInputTf32 };

// K of one mma.sync, and the bytes of an input element in shared memory, per InputKind.
template <int kInput>
constexpr int kMmaKOf = kInput == kInputTf32 ? 8 : 16;
template <int kInput>
constexpr int kInputBytesOf = kInput == kInputTf32 ? 4 : 2;

// Shared offset of the row lane `lane` gives ldmatrix for A's m16 tile mi at k-step ks (f16, bf16; tf32 when K-major),
// the first tile at row `warp_row` of a tile laid out by Tile: K-major (rows of M, K contiguous) or M-major (rows of K,
// M contiguous).
template <int kInput, bool kKMajor, class Tile>
TESSERA_DEVICE int a_fragment_offset(int warp_row, int mi, int ks, int lane) {
  constexpr int kElem = kInputBytesOf<kInput>, kMmaK = kMmaKOf<kInput>;
  const int row0 = warp_row + mi * 16;
  if constexpr (kKMajor) {
    // Lanes 0-15 address rows 0-15 at k 0..7 of the step, lanes 16-31 the same rows at k 8..15 (4 f32 for tf32).
    return Tile::offset(row0 + (lane & 15), ks * kMmaK * kElem + (lane >> 4) * 16);
  } else {
    // Rows of K, M contiguous: matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15).
    const int j = lane >> 3, r = lane & 7;
    return Tile::offset(ks * 16 + r + (j >> 1) * 8, (row0 + (j & 1) * 8) * 2);
  }
}

// The same for B's pair of n8 tiles (ni, ni + 1), the first at column `warp_col`: K-major (rows of N, K contiguous:
// (n 0-7, k lo), (n 0-7, k hi), (n 8-15, k lo), ...) or N-major (rows of K, N contiguous, transposed on the way).
template <int kInput, bool kKMajor, class Tile>
TESSERA_DEVICE int b_fragment_offset(int warp_col, int ni, int ks, int lane) {
  constexpr int kElem = kInputBytesOf<kInput>, kMmaK = kMmaKOf<kInput>;
  const int col0 = warp_col + ni * 8, j = lane >> 3, r = lane & 7;
  if constexpr (kKMajor)
    return Tile::offset(col0 + r + (j >> 1) * 8, ks * kMmaK * kElem + (j & 1) * 16);
  else
    return Tile::offset(ks * 16 + r + (j & 1) * 8, (col0 + (j >> 1) * 8) * 2);
}

// A warp's ldmatrix offsets within a stage, for kTiles m16 tiles (A) or n8 tiles (B) and kKSteps k-steps. One of the
// two indices moves along the tile's rows by 16 (the tiles of a K-major operand, the k-steps of an MN-major one),
// which keeps the swizzle's XOR key wherever 16 rows span whole key periods: with kCache, that index becomes a
// constant step and the other's offsets are computed once per kernel, so a fragment load in the main loop costs
// one add. tf32 with M (N) contiguous is read with 32-bit loads and computes its addresses where it loads.
template <int kInput, bool kKMajor, class Tile, int kTiles, int kKSteps, bool kIsA, bool kCache = true>
struct FragmentOffsets {
  static constexpr bool kLdmatrix = kKMajor || kInputBytesOf<kInput> == 2;
  static constexpr bool kCached =
      kCache && kLdmatrix && 16 % Tile::kRowsPerLine == 0 && (16 / Tile::kRowsPerLine) % 8 == 0;
  static constexpr int kSixteenRows = 16 * Tile::kChunksPerRow * 16;  // bytes
  // B's tiles go in pairs: its cached index is the pair.
  static constexpr int kCachedCount = kKMajor ? kKSteps : (kIsA ? kTiles : kTiles / 2);

  int base, lane;
  int cached[kCached ? kCachedCount : 1];

  TESSERA_DEVICE FragmentOffsets(int warp_base, int warp_lane) : base(warp_base), lane(warp_lane) {
    if constexpr (kCached)
#pragma unroll
      for (int i = 0; i < kCachedCount; ++i) {
        cached[i] = kKMajor ? direct(0, i) : direct(kIsA ? i : 2 * i, 0);
        keep_computed(cached[i]);
      }
  }
  TESSERA_DEVICE int direct(int tile, int ks) const {
    if constexpr (kIsA)
      return a_fragment_offset<kInput, kKMajor, Tile>(base, tile, ks, lane);
    else
      return b_fragment_offset<kInput, kKMajor, Tile>(base, tile, ks, lane);
  }
  // Tile `tile` (B: the first of a pair) at k-step ks.
  TESSERA_DEVICE int at(int tile, int ks) const {
    if constexpr (!kCached)
      return direct(tile, ks);
    else if constexpr (kKMajor)
      return cached[ks] + (kIsA ? tile : tile / 2) * kSixteenRows;
    else
      return cached[kIsA ? tile : tile / 2] + ks * kSixteenRows;
  }
};

// A fragments of k-step ks for kMI m16 tiles at the offsets `at` gives.
template <int kInput, bool kKMajor, class Tile, int kMI, class Offsets>
TESSERA_DEVICE void load_a_fragments(u32 (&fa)[kMI][4], u32 tile, const Offsets& at, int ks) {
  constexpr int kElem = kInputBytesOf<kInput>;
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi) {
    if constexpr (kKMajor) {
      ldmatrix_x4(fa[mi], tile + at.at(mi, ks));
    } else if constexpr (kElem == 2) {
      ldmatrix_x4_trans(fa[mi], tile + at.at(mi, ks));
    } else {
      // tf32 with M contiguous: ldmatrix.trans moves 16-bit elements only, so 32-bit loads in fragment order.
      const int g = at.lane >> 2, t = at.lane & 3, k = ks * 8 + t, row0 = at.base + mi * 16;
      fa[mi][0] = ld_shared<u32>(tile + Tile::offset(k, (row0 + g) * 4));
      fa[mi][1] = ld_shared<u32>(tile + Tile::offset(k, (row0 + g + 8) * 4));
      fa[mi][2] = ld_shared<u32>(tile + Tile::offset(k + 4, (row0 + g) * 4));
      fa[mi][3] = ld_shared<u32>(tile + Tile::offset(k + 4, (row0 + g + 8) * 4));
    }
    if constexpr (kInput == kInputTf32)
#pragma unroll
      for (int i = 0; i < 4; ++i) fa[mi][i] = f32_to_tf32(fa[mi][i]);
  }
}

// A fragments of k-step ks for kMI m16 tiles, the first at row `warp_row`, addresses computed here.
template <int kInput, bool kKMajor, class Tile, int kMI>
TESSERA_DEVICE void load_a_fragments(u32 (&fa)[kMI][4], u32 tile, int warp_row, int ks, int lane) {
  load_a_fragments<kInput, kKMajor, Tile>(
      fa, tile, FragmentOffsets<kInput, kKMajor, Tile, kMI, 1, true, false>(warp_row, lane), ks);
}

// B fragments of k-step ks for kNI n8 tiles (an even count, two per ldmatrix.x4) at the offsets `at` gives.
template <int kInput, bool kKMajor, class Tile, int kNI, class Offsets>
TESSERA_DEVICE void load_b_fragments(u32 (&fb)[kNI][2], u32 tile, const Offsets& at, int ks) {
  static_assert(kNI % 2 == 0, "B fragments load in pairs of n8 tiles");
  constexpr int kElem = kInputBytesOf<kInput>;
#pragma unroll
  for (int ni = 0; ni < kNI; ni += 2) {
    if constexpr (kKMajor || kElem == 2) {
      u32 q[4];
      if constexpr (kKMajor)
        ldmatrix_x4(q, tile + at.at(ni, ks));
      else
        ldmatrix_x4_trans(q, tile + at.at(ni, ks));
      fb[ni][0] = q[0], fb[ni][1] = q[1], fb[ni + 1][0] = q[2], fb[ni + 1][1] = q[3];
    } else {
      const int g = at.lane >> 2, t = at.lane & 3, k = ks * 8 + t, col0 = at.base + ni * 8;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        fb[ni + h][0] = ld_shared<u32>(tile + Tile::offset(k, (col0 + h * 8 + g) * 4));
        fb[ni + h][1] = ld_shared<u32>(tile + Tile::offset(k + 4, (col0 + h * 8 + g) * 4));
      }
    }
    if constexpr (kInput == kInputTf32)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        fb[ni + h][0] = f32_to_tf32(fb[ni + h][0]), fb[ni + h][1] = f32_to_tf32(fb[ni + h][1]);
  }
}

// B fragments of k-step ks for kNI n8 tiles, the first at column `warp_col`, addresses computed here.
template <int kInput, bool kKMajor, class Tile, int kNI>
TESSERA_DEVICE void load_b_fragments(u32 (&fb)[kNI][2], u32 tile, int warp_col, int ks, int lane) {
  load_b_fragments<kInput, kKMajor, Tile>(
      fb, tile, FragmentOffsets<kInput, kKMajor, Tile, kNI, 1, false, false>(warp_col, lane), ks);
}

// One mma.sync of the input kind: D (m16n8, f32) += A · B.
template <int kInput>
TESSERA_DEVICE void mma(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  if constexpr (kInput == kInputF16)
    mma_m16n8k16_f16(d, a, b);
  else if constexpr (kInput == kInputBf16)
    mma_m16n8k16_bf16(d, a, b);
  else
    mma_m16n8k8_tf32(d, a, b);
}

}  // namespace tessera
