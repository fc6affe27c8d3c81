// The parameter block of the CUDA sparse kernels, passed by value: the pattern's arrays and the dense side as a
// GemmParams (SpMM: B, C, D, the epilogue's tensors, alpha, beta; SDDMM: A as `a`, B (N×K) as `b`, the epilogue's
// tensors and alpha). Strides in elements.
#pragma once

#include "tessera/gemm/gemm_params.cuh"

namespace tessera {

struct SparseParams {
  GemmParams dense;
  const void* row_offsets;  // rows + 1, of the kernel's Index type
  const void* col_indices;
  const void* values;    // the stored values (SDDMM: the pattern's s; null when the epilogue does not read it)
  const int* row_order;  // rows by decreasing length (Sputnik's row swizzle), or null for 0, 1, 2, ...
  float* out;            // SDDMM: one value per entry, in the pattern's order
  int rows;              // rows of the pattern
};

}  // namespace tessera
