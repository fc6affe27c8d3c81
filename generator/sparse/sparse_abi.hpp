// The calling convention between the runtime and the generated CPU sparse kernels; the emitter mirrors these structs.
// Index arrays are of the signature's index type (i32 or i64), value arrays of its value type.
#pragma once

#include <cstdint>

#include "generator/gemm/gemm_abi.hpp"

namespace tessera {

struct SpmmKernelArgs {
  std::int64_t m = 0, n = 0, k = 0;   // elements of D (m×n) and of A's columns (k)
  std::int64_t entries = 0;           // stored entries of A (blocks for BSR): the length of col_indices
  const void* row_offsets = nullptr;  // block rows + 1
  const void* col_indices = nullptr;  // block columns
  const void* values = nullptr;       // block_rows·block_cols per entry, row-major within a block
  TensorArg b, c, d;
  const TensorArg* inputs = nullptr;  // one per epilogue tensor, in signature order
  float alpha = 1, beta = 0;
  // A call over one column panel of A (K tiled so that B's panel stays in the L2): the products start from D's
  // partial sums (accumulate) and either end in the epilogue (finish) or are stored raw for the next panel. D is then
  // row-major. A whole call has accumulate = 0, finish = 1.
  std::int32_t accumulate = 0, finish = 1;
  // The columns of D this call computes (N tiled so that B's column panel stays in the L2); a whole call: [0, n).
  std::int64_t n_begin = 0, n_end = 0;
};

// Computes the block rows [row_begin, row_end) of D; disjoint ranges may run concurrently.
using SpmmKernelFn = void (*)(const SpmmKernelArgs* args, std::int64_t row_begin, std::int64_t row_end);

struct SddmmKernelArgs {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t entries = 0;
  const void* row_offsets = nullptr;
  const void* col_indices = nullptr;
  const void* values = nullptr;  // the pattern's values (s); read only when the epilogue names s
  TensorArg a;                   // M×K, unit stride along K
  TensorArg b;                   // N×K, unit stride along K (rs: a row's stride)
  void* out = nullptr;           // one value per entry, in the pattern's order
  const TensorArg* inputs = nullptr;
  float alpha = 1;
  // A call over one K panel (a, b and k aimed at the slice): the dot products start from the partial sums in out
  // (accumulate) and either end in the epilogue (finish) or are stored raw for the next panel. Read only by kernels
  // whose config has a k_panel; a whole call has accumulate = 0, finish = 1.
  std::int32_t accumulate = 0, finish = 1;
};

// Computes the entries of the pattern rows [row_begin, row_end).
using SddmmKernelFn = void (*)(const SddmmKernelArgs* args, std::int64_t row_begin, std::int64_t row_end);

}  // namespace tessera
