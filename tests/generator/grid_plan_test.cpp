// The per-call grid: tiles within the config's blocks, covering the output, and using the threads it may.
#include <gtest/gtest.h>

#include <array>

#include "generator/gemm/grid_plan.hpp"

namespace tessera {
namespace {

// A config of these register tile and cache blocks (the rest as constructed).
CpuGemmConfig blocks(int mr, int nr, int mc, int nc) {
  CpuGemmConfig c;
  c.mr = mr, c.nr = nr, c.mc = mc, c.nc = nc;
  return c;
}

TEST(GridPlan, TilesAreRegisterTileMultiplesWithinTheCacheBlocks) {
  CpuGemmConfig c = blocks(8, 32, 256, 448);
  for (std::int64_t m : {1, 7, 8, 100, 256, 257, 1000, 4096})
    for (std::int64_t n : {1, 31, 33, 448, 449, 4096})
      for (int threads : {1, 2, 3, 8}) {
        const GridPlan p = plan_grid(m, n, 300, 2, c, threads);
        SCOPED_TRACE(testing::Message() << m << "x" << n << " threads " << threads);
        EXPECT_EQ(p.tile_m % c.mr, 0);
        EXPECT_EQ(p.tile_n % c.nr, 0);
        EXPECT_LE(p.tile_m, c.mc);
        EXPECT_LE(p.tile_n, c.nc);
        EXPECT_EQ(p.tiles, 2 * ((m + p.tile_m - 1) / p.tile_m) * ((n + p.tile_n - 1) / p.tile_n));
        EXPECT_GE(p.participants, 1);
        EXPECT_LE(p.participants, std::min<std::int64_t>(threads, p.tiles));
      }
}

TEST(GridPlan, TilesSplitTheOutputIntoNearlyEqualParts) {
  CpuGemmConfig c = blocks(8, 32, 1024, 672);
  // 2048 columns in blocks of at most 672: four tiles of 512, not 3 × 672 and a 32-column sliver.
  GridPlan p = plan_grid(1024, 2048, 1024, 1, c, 1);
  EXPECT_EQ(p.tile_n, 512);
  EXPECT_EQ(p.tile_m, 1024);
  EXPECT_EQ(p.tiles, 4);
  p = plan_grid(1000, 1000, 1000, 1, c, 1);
  EXPECT_EQ(p.tile_n, 512);  // 2 × 500 rounded up to NR
  EXPECT_EQ(p.tile_m, 1000);
  // Whatever the thread count, no tile is less than half as wide or tall as the largest one.
  for (std::int64_t m : {100, 1000, 2048, 3000})
    for (std::int64_t n : {100, 700, 2048, 4100})
      for (int threads : {1, 2, 3}) {
        p = plan_grid(m, n, 512, 1, c, threads);
        SCOPED_TRACE(testing::Message() << m << "x" << n << " threads " << threads);
        EXPECT_GE(n - (n - 1) / p.tile_n * p.tile_n, std::min(n, p.tile_n / 2) - c.nr);
        EXPECT_GE(m - (m - 1) / p.tile_m * p.tile_m, std::min(m, p.tile_m / 2) - c.mr);
      }
}

TEST(GridPlan, TwoThreadsSplitRowsOfACachedBAndColumnsOfAPackedOrStreamedOne) {
  CpuGemmConfig c = blocks(8, 32, 1024, 672);
  c.pack_b = false;  // B read in place from the caches by every row: each thread keeps all of it
  GridPlan p = plan_grid(256, 256, 256, 1, c, 2);
  EXPECT_EQ(p.tile_m, 128);
  EXPECT_EQ(p.tile_n, 256);
  // Also where MR = 6 makes the halves of 128 rows uneven (66 and 62): the rows, not the columns, are split.
  CpuGemmConfig six = blocks(6, 64, 1020, 1024);
  six.pack_b = false;
  p = plan_grid(128, 128, 128, 1, six, 2);
  EXPECT_EQ(p.tile_m, 66);
  EXPECT_EQ(p.tile_n, 128);
  c.pack_b = true;  // each thread packs only its columns of B
  p = plan_grid(256, 256, 256, 1, c, 2);
  EXPECT_EQ(p.tile_m, 256);
  EXPECT_EQ(p.tile_n, 128);
  // A skinny kernel streams B in place into a few rows: each thread streams half of B, not all of it.
  c.pack_b = false;
  c.mr = 4;
  c.nr = 96;
  c.mc = 32;
  c.nc = 4128;
  p = plan_grid(32, 4096, 4096, 1, c, 2);
  EXPECT_EQ(p.tile_m, 32);
  EXPECT_LE(p.tile_n, 2112);
  EXPECT_EQ(p.participants, 2);
}

TEST(GridPlan, LargeProblemsUseEveryThreadAndSmallOnesOne) {
  CpuGemmConfig c;
  c.mc = 256;
  c.nc = 448;
  EXPECT_EQ(plan_grid(256, 256, 256, 1, c, 2).participants, 2);
  EXPECT_EQ(plan_grid(1024, 1024, 1024, 1, c, 2).participants, 2);
  EXPECT_EQ(plan_grid(8, 8, 8, 1, c, 2).participants, 1);
  EXPECT_EQ(plan_grid(0, 8, 8, 1, c, 2).tiles, 0);
  EXPECT_EQ(plan_grid(8, 8, 8, 0, c, 2).tiles, 0);
}

// What the runtime's two-thread choice adds to the cost model's one-thread scores: the busiest thread's share of one
// thread's time. About half where the tiles split evenly, more where the register tile leaves an odd count of them
// (48 columns of 16-wide tiles: 32 for one thread, 16 for the other), 1 for one thread or a problem too small to
// split; fixed-size kernels by whole matrices (3 over 2 threads: 2 for one).
TEST(GridPlan, TimeShareOfTheBusiestThread) {
  const CpuGemmConfig c = blocks(8, 16, 1024, 1024);
  const GridPlan odd = plan_grid(8, 48, 50000, 1, c, 2), even = plan_grid(8, 64, 50000, 1, c, 2);
  EXPECT_GT(odd.time_share, 0.6);
  EXPECT_LT(odd.time_share, 0.75);
  EXPECT_GT(even.time_share, 0.45);
  EXPECT_LT(even.time_share, 0.55);
  EXPECT_EQ(plan_grid(1024, 1024, 1024, 1, c, 1).time_share, 1.0);
  EXPECT_EQ(plan_grid(8, 8, 8, 1, c, 2).time_share, 1.0);
  const GridPlan big = plan_grid(2048, 2048, 512, 1, blocks(8, 32, 256, 512), 2);
  EXPECT_GT(big.time_share, 0.45);
  EXPECT_LT(big.time_share, 0.6);
  CpuGemmConfig fixed = blocks(8, 32, 64, 64);
  fixed.fixed_m = fixed.fixed_n = fixed.fixed_k = 64;
  EXPECT_NEAR(plan_grid(64, 64, 64, 3, fixed, 2).time_share, 2.0 / 3, 1e-9);
  EXPECT_NEAR(plan_grid(64, 64, 64, 4, fixed, 2).time_share, 0.5, 1e-9);
}

// Large problems get several tiles a thread (so a thread that finishes early takes a late one's), none narrower
// than 256 unless the extent is; small ones and B streamed into a few rows keep the fewest tiles.
TEST(GridPlan, LargeProblemsGiveEachThreadSeveralWideTiles) {
  CpuGemmConfig c = blocks(8, 32, 1024, 512);
  for (auto [m, n, k] : {std::array<std::int64_t, 3>{1024, 1024, 1024},
                         {1000, 1000, 1000},
                         {4096, 128, 4096},
                         {64, 4096, 4096},
                         {2048, 2048, 2048}}) {
    SCOPED_TRACE(testing::Message() << m << "x" << n << "x" << k);
    const GridPlan p = plan_grid(m, n, k, 1, c, 2);
    EXPECT_GE(p.tiles, 8);
    EXPECT_TRUE(p.tile_m >= 256 || p.tile_m >= m);
    EXPECT_TRUE(p.tile_n >= 256 || p.tile_n >= n);
    EXPECT_EQ(p.participants, 2);
  }
  // One thread: the largest tiles.
  GridPlan p = plan_grid(1024, 1024, 1024, 1, c, 1);
  EXPECT_EQ(p.tiles, 2);
  // 256³ is 16.7M multiply-adds: one tile a thread.
  EXPECT_EQ(plan_grid(256, 256, 256, 1, c, 2).tiles, 2);
  // A skinny kernel streaming B keeps one strip of columns a thread.
  c.pack_b = false;
  c.mr = 8;
  c.nr = 48;
  c.mc = 32;
  c.nc = 4128;
  p = plan_grid(32, 4096, 4096, 1, c, 2);
  EXPECT_EQ(p.tiles, 2);
  EXPECT_EQ(p.tile_m, 32);
}

// Tiles are costed at their real extents and scheduled as the pool runs them: an edge tile of 65 columns is not a
// whole one, and two unequal tiles are not two equal halves.
TEST(GridPlan, EdgeTilesCostWhatTheyHoldAndThreadsGetEqualWork) {
  CpuGemmConfig c = blocks(6, 64, 1020, 512);
  c.kc = 512;
  c.pack_a = false;
  c.pack_b = true;
  // N = 1025: not 64-column tiles (a 1-column sliver beside them looked as dear as a whole tile).
  GridPlan p = plan_grid(1024, 1025, 1024, 1, c, 2);
  EXPECT_GE(p.tile_n, 256);
  EXPECT_GE(p.tiles, 8);
  // 777×333×555 in two tiles: the rows halved (392 and 385), not the columns in 192 and 141.
  c.mr = 8;
  c.nr = 48;
  c.mc = 1024;
  c.nc = 672;
  c.kc = 384;
  p = plan_grid(777, 333, 555, 1, c, 2);
  const std::int64_t tiles_m = (777 + p.tile_m - 1) / p.tile_m, tiles_n = (333 + p.tile_n - 1) / p.tile_n;
  ASSERT_EQ(p.tiles, tiles_m * tiles_n);
  // Each thread's share of rows × columns within 5% of half the problem.
  const auto share = [&](std::int64_t first, std::int64_t last) {
    double sum = 0;
    for (std::int64_t t = first; t < last; ++t)
      sum += static_cast<double>(std::min(p.tile_m, 777 - t / tiles_n * p.tile_m)) *
             static_cast<double>(std::min(p.tile_n, 333 - t % tiles_n * p.tile_n));
    return sum;
  };
  EXPECT_NEAR(share(0, p.tiles / 2) / (777.0 * 333.0), 0.5, 0.05) << p.tile_m << "x" << p.tile_n;
  EXPECT_NEAR(share(p.tiles / 2, p.tiles) / (777.0 * 333.0), 0.5, 0.05) << p.tile_m << "x" << p.tile_n;
}

// A fixed kernel's tiles are the halves of its rows (whole MR tiles first) where there are fewer matrices than
// threads, so that two threads share even a single matrix once it outweighs waking one; otherwise whole matrices.
TEST(GridPlan, FixedKernelsSplitInHalvesOfRows) {
  CpuGemmConfig c;
  c.mr = 8;
  c.nr = 32;
  c.fixed_m = c.fixed_n = c.fixed_k = 64;
  c.mc = c.nc = 64;
  GridPlan p = plan_grid(64, 64, 64, 1, c, 2);
  EXPECT_EQ(p.tiles, 2);
  EXPECT_EQ(p.tile_m, 32);
  EXPECT_EQ(p.participants, 2);
  p = plan_grid(64, 64, 64, 5, c, 2);
  EXPECT_EQ(p.tiles, 5);
  EXPECT_EQ(p.tile_m, 64);
  EXPECT_EQ(p.participants, 2);
  EXPECT_EQ(plan_grid(64, 64, 64, 1, c, 1).tiles, 1);
  c.fixed_m = 17;  // halves of 16 rows and 1
  EXPECT_EQ(c.fixed_part_rows(), 16);
  EXPECT_EQ(plan_grid(17, 64, 64, 1, c, 2).participants, 1);  // 70k multiply-adds: one thread
  EXPECT_EQ(plan_grid(17, 64, 256, 1, c, 2).tiles, 2);
  c.fixed_m = c.fixed_n = c.fixed_k = 15;  // fewer than two register tiles of rows
  EXPECT_EQ(c.fixed_row_parts(), 1);
  EXPECT_EQ(plan_grid(15, 15, 15, 4, c, 2).tiles, 4);
}

}  // namespace
}  // namespace tessera
