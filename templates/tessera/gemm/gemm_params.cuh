// The one kernel parameter of every tessera GEMM: sizes, operand views and epilogue inputs. It mirrors the CPU
// ABI (generator/gemm_abi.hpp) so that one binding serves both back-ends; strides are in elements.
#pragma once

#include "tessera/platform.cuh"

namespace tessera {

struct TensorRef {
  const void* data;
  i64 rs, cs, bs;  // row, column and batch strides
};

enum { kMaxEpilogueInputs = 8 };

struct GemmParams {
  int m, n, k, batch;
  TensorRef a, b, c, d;
  TensorRef inputs[kMaxEpilogueInputs];  // in the epilogue's tensor order
  float alpha, beta;
  float* workspace;  // split-K partial sums: split_k × batch × m × n, row-major
  int k_per_split;   // a multiple of block_k
};

}  // namespace tessera
