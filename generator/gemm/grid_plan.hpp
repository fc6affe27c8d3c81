// Splits a CPU GEMM's output into macro-tiles for the worker threads, per call, within the config's cache blocks.
// The planner needs nothing but its stack and <algorithm>/<cmath>: kernel libraries (`tessera library build`) compile
// this very file into their driver (with TESSERA_GRID_PLAN_STANDALONE), so that they split work as the runtime does.
#pragma once

#include <cstdint>

namespace tessera {

struct GridPlan {
  std::int64_t tile_m = 0, tile_n = 0;  // multiples of MR / NR, at most MC / NC
  std::int64_t tiles = 0;
  int participants = 1;
  // The busiest thread's estimated time as a share of one thread's computing the largest tiles alone (what the cost
  // model's one-thread records time): about 1/threads when the tiles divide evenly, 1 when one thread gets them all.
  double time_share = 1;
};

// What the planner needs of a config (CpuGemmConfig): register tile, cache blocks, packing, fixed sizes.
struct GridBlocks {
  std::int64_t mr = 0, nr = 0, mc = 0, nc = 0;
  bool pack_a = false, pack_b = false;
  std::int64_t fixed_m = 0;  // 0: sizes at run time
  std::int64_t fixed_row_parts = 1, fixed_part_rows = 0;
  // A multiply-add's cost in those of the vector FMAs the planner's constants are measured in: AMX tiles multiply
  // several times faster, so their fixed costs (packing, tiles, threads) weigh more.
  double work_scale = 1;
  // Between equal estimates, split the rows and keep B whole per thread (see plan_grid).
  bool rows_first = false;
};

// The blocks of an AMX kernel: it packs the A sliver of each tile's rows (a packed A, for the planner) and multiplies
// at about four times the vector kernels' rate (bf16 1024³ on one thread of the AMX Xeon: 935 GFLOP/s against 214 on
// vdpbf16ps); its threads split rows (256³ bf16 on two threads ran in 27.5 us as two 128×256 tiles and 45 us as two
// 256×128 ones; one thread: 33.6 us).
inline GridBlocks amx_blocks(GridBlocks b) {
  b.pack_a = true;
  b.work_scale = 0.25;
  b.rows_first = true;
  return b;
}

// Chooses the tile shape and thread count that minimise an estimate of the slowest thread's time: tile work
// (padded to the register tile), B packing per tile, a fixed cost per tile and per extra thread.
GridPlan plan_grid(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, const GridBlocks& blocks,
                   int threads);

}  // namespace tessera

#ifndef TESSERA_GRID_PLAN_STANDALONE
#include "generator/gemm/cpu_gemm_config.hpp"

namespace tessera {

inline GridBlocks grid_blocks(const CpuGemmConfig& c) {
  const GridBlocks b{
      c.mr, c.nr, c.mc, c.nc, c.pack_a, c.pack_b, c.fixed_m, c.fixed_row_parts(), c.fixed() ? c.fixed_part_rows() : 0};
  return c.amx != CpuGemmConfig::kAmxNone ? amx_blocks(b) : b;
}

inline GridPlan plan_grid(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, const CpuGemmConfig& c,
                          int threads) {
  return plan_grid(m, n, k, batch, grid_blocks(c), threads);
}

}  // namespace tessera
#endif
