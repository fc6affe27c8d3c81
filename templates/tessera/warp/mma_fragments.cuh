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

// A fragments of k-step ks for kMI m16 tiles, the first at row `warp_row` of a tile laid out by Tile: K-major (rows of
// M, K contiguous) or M-major (rows of K, M contiguous).
template <int kInput, bool kKMajor, class Tile, int kMI>
TESSERA_DEVICE void load_a_fragments(u32 (&fa)[kMI][4], u32 tile, int warp_row, int ks, int lane) {
  constexpr int kElem = kInputBytesOf<kInput>, kMmaK = kMmaKOf<kInput>;
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi) {
    const int row0 = warp_row + mi * 16;
    if constexpr (kKMajor) {
      // Lanes 0-15 address rows 0-15 at k 0..7 of the step, lanes 16-31 the same rows at k 8..15 (4 f32 for tf32).
      ldmatrix_x4(fa[mi], tile + Tile::offset(row0 + (lane & 15), ks * kMmaK * kElem + (lane >> 4) * 16));
    } else if constexpr (kElem == 2) {
      // Rows of K, M contiguous: matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15).
      const int j = lane >> 3, r = lane & 7;
      ldmatrix_x4_trans(fa[mi], tile + Tile::offset(ks * 16 + r + (j >> 1) * 8, (row0 + (j & 1) * 8) * 2));
    } else {
      // tf32 with M contiguous: ldmatrix.trans moves 16-bit elements only, so 32-bit loads in fragment order.
      const int g = lane >> 2, t = lane & 3, k = ks * 8 + t;
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

// B fragments of k-step ks for kNI n8 tiles (an even count, two per ldmatrix.x4), the first at column `warp_col` of a
// tile laid out by Tile: K-major (rows of N, K contiguous) or N-major (rows of K, N contiguous).
template <int kInput, bool kKMajor, class Tile, int kNI>
TESSERA_DEVICE void load_b_fragments(u32 (&fb)[kNI][2], u32 tile, int warp_col, int ks, int lane) {
  static_assert(kNI % 2 == 0, "B fragments load in pairs of n8 tiles");
  constexpr int kElem = kInputBytesOf<kInput>, kMmaK = kMmaKOf<kInput>;
#pragma unroll
  for (int ni = 0; ni < kNI; ni += 2) {
    const int col0 = warp_col + ni * 8;
    if constexpr (kKMajor || kElem == 2) {
      const int j = lane >> 3, r = lane & 7;
      u32 q[4];
      if constexpr (kKMajor)  // rows of N, K contiguous: (n 0-7, k lo), (n 0-7, k hi), (n 8-15, k lo), ...
        ldmatrix_x4(q, tile + Tile::offset(col0 + r + (j >> 1) * 8, ks * kMmaK * kElem + (j & 1) * 16));
      else  // rows of K, N contiguous, transposed on the way
        ldmatrix_x4_trans(q, tile + Tile::offset(ks * 16 + r + (j & 1) * 8, (col0 + (j >> 1) * 8) * 2));
      fb[ni][0] = q[0], fb[ni][1] = q[1], fb[ni + 1][0] = q[2], fb[ni + 1][1] = q[3];
    } else {
      const int g = lane >> 2, t = lane & 3, k = ks * 8 + t;
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
