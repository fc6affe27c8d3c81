// CSR SDDMM after Sputnik: a warp owns one row of the pattern (rows visited longest first) and takes its entries 32
// at a time, one per lane. The A row passes through the warp's slice of shared memory kKChunk values at a time;
// each lane reads it as a broadcast and its own entry's B row with Vec-wide vector loads, so no lane waits on a
// reduction. The dot products go through the emitted sampled epilogue (acc, s, alpha, tensors [m] / [n]) to the
// output, in the pattern's order. Grid: x = row groups of Warps rows.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/element.cuh"
#include "tessera/epilogue_math.cuh"
#include "tessera/sparse/sparse_params.cuh"

namespace tessera {

// T supplies: Index, Value, AElement, BElement, Vec (1, 2 or 4: B's rows are aligned to it), Warps, KChunk,
// ReadsS (whether the epilogue reads the pattern's values).
template <class T, class Epi>
TESSERA_DEVICE void sddmm_csr(const SparseParams& p) {
  using Index = typename T::Index;
  using A = typename T::AElement;
  using B = typename T::BElement;
  constexpr int kVec = T::Vec, kChunk = T::KChunk;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int slot = static_cast<int>(blockIdx.x) * T::Warps + warp;
  if (slot >= p.rows) return;
  const int row = p.row_order ? ld_global(p.row_order + slot) : slot;
  const i64 k = p.dense.k;
  const Index* offsets = static_cast<const Index*>(p.row_offsets);
  const Index* indices = static_cast<const Index*>(p.col_indices);
  const A* a = static_cast<const A*>(p.dense.a.data) + row * p.dense.a.rs;
  const B* b = static_cast<const B*>(p.dense.b.data);
  const i64 first = ld_global(offsets + row), end = ld_global(offsets + row + 1);
  const u32 base = static_cast<u32>(warp) * kChunk * 4;

  for (i64 chunk = first; chunk < end; chunk += 32) {
    const i64 entry = chunk + lane;
    const bool mine = entry < end;
    const i64 column = mine ? static_cast<i64>(ld_global(indices + entry)) : 0;
    const B* source = b + column * p.dense.b.rs;
    float acc = 0.0f;
    for (i64 k0 = 0; k0 < k; k0 += kChunk) {
      const int width = k - k0 < kChunk ? static_cast<int>(k - k0) : kChunk;
      syncwarp();  // the previous slice has been read by every lane
      for (int q = lane; q < width; q += 32) st_shared<float>(base + q * 4, to_f32(ld_global(a + k0 + q)));
      syncwarp();
      if (!mine) continue;
      int q = 0;
      for (; q + kVec <= width; q += kVec) {
        const Vector<B, kVec> x = ld_global(reinterpret_cast<const Vector<B, kVec>*>(source + k0 + q));
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc += ld_shared<float>(base + (q + i) * 4) * to_f32(x.v[i]);
      }
      for (; q < width; ++q) acc += ld_shared<float>(base + q * 4) * to_f32(ld_global(source + k0 + q));
    }
    if (mine) {
      float s = 0.0f;
      if constexpr (T::ReadsS) s = to_f32(ld_global(static_cast<const typename T::Value*>(p.values) + entry));
      st_global(p.out + entry, Epi::apply(acc, s, row, column, 0, p.dense));
    }
  }
}

}  // namespace tessera
