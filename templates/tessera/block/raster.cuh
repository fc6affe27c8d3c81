// Threadblock rasterisation: linear block ids walk groups of kGroup tile rows column by column, so consecutive blocks
// share B tiles (and A tiles within a group) while they are in L2 (Triton's grouped ordering).
#pragma once

#include "tessera/platform.cuh"

namespace tessera {

template <int kGroup>
TESSERA_DEVICE void raster_tile(int id, int tiles_m, int tiles_n, int& tile_m, int& tile_n) {
  const int per_group = kGroup * tiles_n;
  const int first_m = (id / per_group) * kGroup;
  const int rows = tiles_m - first_m < kGroup ? tiles_m - first_m : kGroup;
  const int in_group = id % per_group;
  tile_m = first_m + in_group % rows;
  tile_n = in_group / rows;
}

// The inverse: the linear block id of tile (tile_m, tile_n).
template <int kGroup>
TESSERA_DEVICE int raster_index(int tile_m, int tile_n, int tiles_m, int tiles_n) {
  const int first_m = (tile_m / kGroup) * kGroup;
  const int rows = tiles_m - first_m < kGroup ? tiles_m - first_m : kGroup;
  return first_m * tiles_n + tile_n * rows + (tile_m - first_m);
}

}  // namespace tessera
