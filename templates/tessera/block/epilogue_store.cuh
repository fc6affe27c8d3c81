// Writing results: a slab of accumulators, already in shared or registers, goes through the emitted epilogue to D
// with the widest stores D's alignment allows, or raw to the split-K workspace.
#pragma once

#include "tessera/element.cuh"
#include "tessera/epilogue_math.cuh"
#include "tessera/gemm/gemm_params.cuh"

namespace tessera {

// D(m, n) of batch b, for a row- or column-major D.
template <class Out, bool kRowMajor>
TESSERA_DEVICE Out* d_element(const GemmParams& p, i64 m, i64 n, i64 b) {
  Out* d = static_cast<Out*>(const_cast<void*>(p.d.data)) + b * p.d.bs;
  return kRowMajor ? d + m * p.d.rs + n : d + m + n * p.d.cs;
}

// Stores kVec consecutive outputs along D's contiguous dimension starting at (m, n); `valid` of them are inside
// the matrix. values[i] is at (m, n + i) for a row-major D and (m + i, n) for a column-major one.
template <class Out, bool kRowMajor, int kVec>
TESSERA_DEVICE void store_d(const GemmParams& p, i64 m, i64 n, i64 b, const float (&values)[kVec], int valid) {
  Out* d = d_element<Out, kRowMajor>(p, m, n, b);
  if (valid == kVec) {
    Vector<Out, kVec> v;
#pragma unroll
    for (int i = 0; i < kVec; ++i) v.v[i] = from_f32<Out>(values[i]);
    st_global(reinterpret_cast<Vector<Out, kVec>*>(d), v);
  } else {
    // Unrolled with a predicate: a loop bounded by `valid` would index `values` dynamically (local memory).
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (i < valid) st_global(d + i, from_f32<Out>(values[i]));
  }
}

// Partial sums of one K split: workspace[split][b][m][n], row-major, f32.
TESSERA_DEVICE float* workspace_element(const GemmParams& p, int split, i64 m, i64 n, i64 b) {
  return p.workspace + ((static_cast<i64>(split) * p.batch + b) * p.m + m) * p.n + n;
}

// The second kernel of a split-K GEMM: sums the splits of each output and applies the epilogue.
template <class T, class Epi>
TESSERA_DEVICE void splitk_reduce(const GemmParams& p) {
  const i64 total = static_cast<i64>(p.batch) * p.m * p.n;
  for (i64 idx = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 b = idx / (static_cast<i64>(p.m) * p.n);
    const i64 rem = idx - b * p.m * p.n;
    const i64 m = rem / p.n, n = rem - m * p.n;
    float sum = 0.0f;
    for (int s = 0; s < T::SplitK; ++s) sum += ld_global(workspace_element(p, s, m, n, b));
    st_global(d_element<typename T::Out, T::DRowMajor>(p, m, n, b),
              from_f32<typename T::Out>(Epi::apply(sum, m, n, b, p)));
  }
}

}  // namespace tessera
