// The calling convention between the runtime and a generated CPU GEMM kernel; emit_llvm mirrors these structs.
#pragma once

#include <cstdint>

#include "generator/core/tile_grid.hpp"
#include "generator/gemm/cpu_gemm_config.hpp"

namespace tessera {

// A matrix in memory: element strides per row, column and batch (0 broadcasts).
struct TensorArg {
  const void* data = nullptr;
  std::int64_t rs = 0, cs = 0, bs = 0;
};

struct GemmKernelArgs {
  std::int64_t m = 0, n = 0, k = 0, batch = 0;
  // The macro-tile the runtime chose for this call: a multiple of MR (NR) up to the config's MC (NC), so that the
  // grid splits evenly over the threads.
  std::int64_t tile_m = 0, tile_n = 0;
  TensorArg a, b, c, d;
  const TensorArg* inputs = nullptr;  // one per epilogue tensor, in signature order
  float alpha = 1, beta = 0;
};

// Computes the macro-tiles [tile_begin, tile_end) with `workspace` as scratch (CpuGemmConfig::workspace_bytes(),
// 64-byte aligned); disjoint ranges may run concurrently.
using GemmKernelFn = void (*)(const GemmKernelArgs* args, void* workspace, std::int64_t tile_begin,
                              std::int64_t tile_end);

inline std::int64_t gemm_tile_count(const GemmKernelArgs& a) {
  return TileGrid{a.m, a.n, a.tile_m, a.tile_n, a.batch}.count();
}

}  // namespace tessera
