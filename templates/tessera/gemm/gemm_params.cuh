// The one kernel parameter of every tessera GEMM: sizes, operand views and epilogue inputs. It mirrors the CPU
// ABI (generator/gemm_abi.hpp) so that one binding serves both back-ends; strides are in elements.
#pragma once

#include "tessera/arch/tma_descriptor.cuh"
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
  float* workspace;  // split-K (stream-K) partial sums: split_k (pieces) × batch × m × n, row-major
  int k_per_split;   // a multiple of block_k
  // Stream-K: the (tile, k-tile) iterations of the first sk_shared_tiles tiles, k-tiles per tile, and the blocks
  // of the grid that shares them (the tiles after go whole to the blocks in turn); per shared tile, a counter of the
  // pieces stored for it (zero at launch).
  int sk_blocks, sk_k_tiles;
  i64 sk_total, sk_shared_tiles;
  int* tile_flags;
  // The wgmma kernel's TMA descriptors of A and B (rank 3: K, M or N, batch) and, with TMA stores, of D (N, M,
  // batch), read through the parameter (__grid_constant__); other kernels leave them unset.
  TmaDescriptor a_map, b_map, d_map;
};

}  // namespace tessera
