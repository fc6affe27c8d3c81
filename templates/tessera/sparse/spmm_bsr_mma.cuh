// Block-sparse SpMM on tensor cores (16×16 blocks, f16 or bf16), after Magicube's use of mma for BSR: a warp owns
// one block row of A (16 rows; block rows visited longest first) and 8·Tiles columns of N. Each stored block is one
// mma.sync m16n8k16 A operand, read straight from its row-major values (each thread's pairs are adjacent, so four
// 32-bit loads); each n8 tile's B operand is the 16 B rows the block's column names (rows past K read as zero, a
// partial edge block). The f32 accumulators go through the emitted epilogue to D (row-major f32), rows past M and
// columns past N not stored. Grid: x = block-row groups of Warps, z = column tiles of N.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/element.cuh"
#include "tessera/epilogue_math.cuh"
#include "tessera/sparse/sparse_params.cuh"
#include "tessera/warp/mma_fragments.cuh"

namespace tessera {

// T supplies: Index, Element (half_t or bfloat16_t: the values and B), kInput, Tiles (n8 tiles per warp), Warps.
template <class T, class Epi>
TESSERA_DEVICE void spmm_bsr_mma(const SparseParams& p) {
  using Index = typename T::Index;
  constexpr int kTiles = T::Tiles;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int slot = static_cast<int>(blockIdx.x) * T::Warps + warp;
  if (slot >= p.rows) return;
  const int block_row = p.row_order ? ld_global(p.row_order + slot) : slot;
  const i64 m = p.dense.m, n = p.dense.n, k = p.dense.k;
  const i64 n0 = static_cast<i64>(blockIdx.z) * (8 * kTiles);
  const Index* offsets = static_cast<const Index*>(p.row_offsets);
  const Index* indices = static_cast<const Index*>(p.col_indices);
  const u16* values = static_cast<const u16*>(p.values);
  const u16* b = static_cast<const u16*>(p.dense.b.data);
  const i64 first = ld_global(offsets + block_row), end = ld_global(offsets + block_row + 1);

  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  for (i64 e = first; e < end; ++e) {
    // A: the block's pairs (g, 2t), (g+8, 2t), (g, 2t+8), (g+8, 2t+8), row-major within the block.
    const u32* block = reinterpret_cast<const u32*>(values + e * 256);
    const u32 a[4] = {ld_global(block + g * 8 + t), ld_global(block + (g + 8) * 8 + t),
                      ld_global(block + g * 8 + t + 4), ld_global(block + (g + 8) * 8 + t + 4)};
    const i64 k0 = static_cast<i64>(ld_global(indices + e)) * 16;
    // B rows k0 + 2t, +1, +8, +9 (zero past K).
    const i64 rows[4] = {k0 + 2 * t, k0 + 2 * t + 1, k0 + 2 * t + 8, k0 + 2 * t + 9};
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const i64 column = n0 + 8 * j + g;
      u16 h[4];
#pragma unroll
      for (int r = 0; r < 4; ++r)
        h[r] = rows[r] < k && column < n ? ld_global(b + rows[r] * p.dense.b.rs + column) : u16(0);
      const u32 bf[2] = {static_cast<u32>(h[0]) | (static_cast<u32>(h[1]) << 16),
                         static_cast<u32>(h[2]) | (static_cast<u32>(h[3]) << 16)};
      mma<T::kInput>(acc[j], a, bf);
    }
  }

  float* d = static_cast<float*>(const_cast<void*>(p.dense.d.data));
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const i64 row = static_cast<i64>(block_row) * 16 + g + (i >> 1) * 8;
      const i64 column = n0 + 8 * j + 2 * t + (i & 1);
      if (row < m && column < n)
        st_global(d + row * p.dense.d.rs + column, Epi::apply(acc[j][i], row, column, 0, p.dense));
    }
}

}  // namespace tessera
