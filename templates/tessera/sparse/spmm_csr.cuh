// CSR SpMM after Sputnik (Gale et al., SC'20): a warp owns one row of A (rows visited longest first) and 32·Vec
// columns of N; the row's column indices and values are staged 32 at a time in the warp's slice of shared memory,
// then every lane adds value × B[column, its Vec columns] with one vector load per entry (the residue of N
// predicated). The accumulators go through the emitted epilogue to D (row-major f32). No block-wide barrier: a
// warp with no row leaves at once. Grid: x = row groups of Warps rows, z = column tiles of N.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/element.cuh"
#include "tessera/epilogue_math.cuh"
#include "tessera/sparse/sparse_params.cuh"

namespace tessera {

// T supplies: Index (int or i64), Value and BElement (float, half_t or bfloat16_t), Vec (1, 2 or 4: B's rows are
// aligned to it), Warps.
template <class T, class Epi>
TESSERA_DEVICE void spmm_csr(const SparseParams& p) {
  using Index = typename T::Index;
  using B = typename T::BElement;
  constexpr int kVec = T::Vec, kStage = 32;
  // A warp's shared slice: kStage indices (i64), then kStage values (f32).
  constexpr u32 kSlice = kStage * 12;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int slot = static_cast<int>(blockIdx.x) * T::Warps + warp;
  if (slot >= p.rows) return;
  const int row = p.row_order ? ld_global(p.row_order + slot) : slot;
  const i64 n = p.dense.n;
  const i64 n0 = static_cast<i64>(blockIdx.z) * (32 * kVec) + lane * kVec;
  const Index* offsets = static_cast<const Index*>(p.row_offsets);
  const Index* indices = static_cast<const Index*>(p.col_indices);
  const typename T::Value* values = static_cast<const typename T::Value*>(p.values);
  const B* b = static_cast<const B*>(p.dense.b.data);
  const i64 first = ld_global(offsets + row), end = ld_global(offsets + row + 1);
  const u32 base = static_cast<u32>(warp) * kSlice;

  float acc[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc[i] = 0.0f;
  for (i64 chunk = first; chunk < end; chunk += kStage) {
    const int count = end - chunk < kStage ? static_cast<int>(end - chunk) : kStage;
    if (lane < count) {
      st_shared<i64>(base + lane * 8, static_cast<i64>(ld_global(indices + chunk + lane)));
      st_shared<float>(base + kStage * 8 + lane * 4, to_f32(ld_global(values + chunk + lane)));
    }
    syncwarp();
    for (int e = 0; e < count; ++e) {
      const i64 column = ld_shared<i64>(base + e * 8);
      const float v = ld_shared<float>(base + kStage * 8 + e * 4);
      const B* source = b + column * p.dense.b.rs + n0;
      if (n0 + kVec <= n) {
        const Vector<B, kVec> x = ld_global(reinterpret_cast<const Vector<B, kVec>*>(source));
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc[i] += v * to_f32(x.v[i]);
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i)
          if (n0 + i < n) acc[i] += v * to_f32(ld_global(source + i));
      }
    }
    syncwarp();  // the slice is refilled only after every lane has read it
  }

  float* d = static_cast<float*>(const_cast<void*>(p.dense.d.data)) + row * p.dense.d.rs + n0;
  float out[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) out[i] = n0 + i < n ? Epi::apply(acc[i], row, n0 + i, 0, p.dense) : 0.0f;
  if (n0 + kVec <= n) {
    Vector<float, kVec> y;
#pragma unroll
    for (int i = 0; i < kVec; ++i) y.v[i] = out[i];
    st_global(reinterpret_cast<Vector<float, kVec>*>(d), y);
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (n0 + i < n) st_global(d + i, out[i]);
  }
}

}  // namespace tessera
