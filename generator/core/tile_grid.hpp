// An output of m × n elements per batch item cut into tile_m × tile_n tiles, the last ones partial: the grid that CPU
// macro-tile loops and CUDA thread-block grids walk, whatever the operation.
#pragma once

#include <cstdint>

#include "generator/core/arith.hpp"

namespace tessera {

struct TileGrid {
  std::int64_t m = 0, n = 0, tile_m = 1, tile_n = 1, batch = 1;

  constexpr std::int64_t rows() const { return ceil_div(m, tile_m); }
  constexpr std::int64_t cols() const { return ceil_div(n, tile_n); }
  constexpr std::int64_t count() const { return batch * rows() * cols(); }
  // The elements the tiles cover over those of the output (1: no partial tiles).
  constexpr double coverage() const {
    return static_cast<double>(rows() * tile_m) * static_cast<double>(cols() * tile_n) /
           (static_cast<double>(m) * static_cast<double>(n));
  }
};

}  // namespace tessera
