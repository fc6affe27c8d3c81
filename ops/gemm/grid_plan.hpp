// Splits a CPU GEMM's output into macro-tiles for the worker threads, per call, within the config's cache blocks.
#pragma once

#include <cstdint>

#include "generator/gemm/cpu_gemm_config.hpp"

namespace tessera {

struct GridPlan {
  std::int64_t tile_m = 0, tile_n = 0;  // multiples of MR / NR, at most MC / NC
  std::int64_t tiles = 0;
  int participants = 1;
};

// Chooses the tile shape and thread count that minimise an estimate of the slowest thread's time: tile work
// (padded to the register tile), B packing per tile, a fixed cost per tile and per extra thread.
GridPlan plan_grid(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, const CpuGemmConfig& config,
                   int threads);

}  // namespace tessera
