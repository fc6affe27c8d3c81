// TileGrid against counting the tiles one by one.
#include "generator/core/tile_grid.hpp"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(TileGrid, CountsEveryPartialTile) {
  for (std::int64_t m : {1, 7, 64, 65, 1025})
    for (std::int64_t n : {1, 16, 17, 300})
      for (std::int64_t tm : {1, 8, 64})
        for (std::int64_t tn : {1, 16, 48})
          for (std::int64_t batch : {0, 1, 3}) {
            const TileGrid grid{m, n, tm, tn, batch};
            std::int64_t rows = 0, cols = 0, covered = 0;
            for (std::int64_t i = 0; i < m; i += tm) ++rows;
            for (std::int64_t j = 0; j < n; j += tn) ++cols;
            for (std::int64_t i = 0; i < m; i += tm)
              for (std::int64_t j = 0; j < n; j += tn) covered += tm * tn;
            EXPECT_EQ(rows, grid.rows());
            EXPECT_EQ(cols, grid.cols());
            EXPECT_EQ(batch * rows * cols, grid.count());
            EXPECT_DOUBLE_EQ(static_cast<double>(covered) / static_cast<double>(m * n), grid.coverage());
          }
}

}  // namespace
}  // namespace tessera
