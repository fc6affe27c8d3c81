#include "generator/gemm/grid_plan.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include "generator/core/arith.hpp"
#include "generator/core/tile_grid.hpp"

namespace tessera {

namespace {

// Costs in multiply-adds of one core (about 140 G/s here): packing one element of B, the fixed cost of a tile,
// and of waking and joining one more thread.
constexpr double kPackElement = 16;
// A tile that packs B starts `depth` new row segments of it; from memory each costs a latency that a segment of
// few lines does not hide, so narrower tiles cost more per element. Without it, 43 column blocks of 256 were split
// into 86 of 128 for an even share (int8 32×11008×4096, B 45 MB, 2 threads): 236 GOP/s against 269 on one thread;
// one thread's 128-wide tiles ran at 123 against 257 (about 70 ns, 10,000 units, per extra segment there). Taken at
// 1,000, and only for a B of at least kPackRowElements elements (16 MiB of f32, 4 MiB of int8): from the caches a
// segment costs far less, and small problems keep their plans.
constexpr double kPackRow = 1000;
constexpr double kPackRowElements = 4 << 20;
constexpr double kPerTile = 30'000;
constexpr double kPerThread = 200'000;
// Reading an element of A or B that a tile does not pack, from L2 or L3: a tile with a quarter of the columns
// rereads all of its rows of A (1 thread, 1024³: 1024×64 tiles ran 3% slower than 1024×512 ones).
constexpr double kReadElement = 2;
// On a shared machine a core can run slower than the other for milliseconds (a hypervisor neighbour). The pool
// lets a thread that runs out take the late one's tiles, which needs several tiles per thread. So a problem of
// at least kStealTile multiply-adds (0.1 ms) a tile gets kTilesPerThread tiles a thread, where tiles that many
// stay at least kStealSide rows and columns (or the whole extent): narrower ones reread too much of A or B
// (4096×128×4096 in 1024×64 tiles: -8%). 2 threads on this VM, alternated with the previous binary, medians of
// 6-10 runs, GFLOP/s: 1024³ 211 -> 215, 1000³ 129 -> 151, 4096×128×4096 198 -> 221, 64×4096×4096 79-85 ->
// 111-116, 832×384×576 with A col-major 137 -> 150 (squarer tiles, by the read cost); 1088³ and 512×4096×4096
// with B col-major unchanged.
constexpr std::int64_t kTilesPerThread = 4;
constexpr double kStealTile = 16e6;
constexpr std::int64_t kStealSide = 256;
// A B read in place from the caches by many rows, split by columns between threads, runs slower than the estimate
// says, while the row split's tiles of MR multiples look a few percent uneven (128³, 6×64 tiles, 2 threads: columns
// 132×64 at 222-225 GFLOP/s, rows 66×128 at 283-286, interleaved in one process): the column split pays this factor.
// (Against the plan without it, alternated in one process, 2 threads: 128³ 177-192 -> 193-207, 256³ 199-279 -> 206-298;
// 160³, 96³, 192³ even.)
constexpr double kSplitInPlaceB = 1.15;
// Below this many tiles a thread, each is claimed alone (ops/gemm/gemm.cpp claims chunks of tiles / (8 × threads)).
constexpr std::int64_t kPlayedOutTiles = 16;
// The schedule is played out for at most this many tiles (more threads than 64 take the mean-cost estimate), so that
// the planner needs no memory beyond its stack: kernel libraries run it without a C++ runtime.
constexpr std::int64_t kMaxPlayedOutTiles = 1024;

// Tile sizes to try along one dimension, largest first: `extent` split into s nearly equal tiles (multiples of
// `unit`, at most `block`), from the fewest tiles the block allows, one more at a time while that can still even
// out the threads' shares, then doubling. Equal tiles, not block-sized ones and a sliver: 2048 columns in NC = 672
// blocks were 3 × 672 + 32, and the 32-column tile reread all of A for one micro-tile per row.
struct TileSizes {
  std::int64_t size[96];  // at most 16 one-by-one steps and 63 doublings
  std::size_t count = 0;
  std::int64_t operator[](std::size_t i) const { return size[i]; }
};

TileSizes tile_sizes(std::int64_t extent, std::int64_t block, std::int64_t unit, int threads) {
  TileSizes sizes;
  const std::int64_t fewest = ceil_div(extent, block);
  for (std::int64_t splits = fewest;;) {
    const std::int64_t size = round_up(ceil_div(extent, splits), unit);
    if (sizes.count == 0 || size < sizes.size[sizes.count - 1]) sizes.size[sizes.count++] = size;
    if (size <= unit || sizes.count == std::size(sizes.size)) break;
    splits = splits < fewest + std::min(kTilesPerThread * threads, std::int64_t{16}) ? splits + 1 : 2 * splits;
  }
  return sizes;
}

// When the last of `threads` is done with tiles of these costs, scheduled as ThreadPool does: each takes its
// contiguous share in index order, then claims the next tile of the other shares.
double pool_makespan(const double* costs, std::int64_t tiles, int threads) {
  std::int64_t next[kMaxPlayedOutTiles], end[kMaxPlayedOutTiles];
  double clock[kMaxPlayedOutTiles] = {};
  bool idle[kMaxPlayedOutTiles] = {};
  for (int q = 0; q < threads; ++q) {
    next[static_cast<std::size_t>(q)] = tiles * q / threads;
    end[static_cast<std::size_t>(q)] = tiles * (q + 1) / threads;
  }
  for (;;) {
    int q = -1;  // the working thread that is free first
    for (int i = 0; i < threads; ++i)
      if (!idle[static_cast<std::size_t>(i)] &&
          (q < 0 || clock[static_cast<std::size_t>(i)] < clock[static_cast<std::size_t>(q)]))
        q = i;
    if (q < 0) break;
    bool claimed = false;
    for (int s = 0; s < threads && !claimed; ++s) {
      const auto share = static_cast<std::size_t>((q + s) % threads);
      if (next[share] < end[share]) {
        clock[static_cast<std::size_t>(q)] += costs[static_cast<std::size_t>(next[share]++)];
        claimed = true;
      }
    }
    if (!claimed) idle[static_cast<std::size_t>(q)] = true;
  }
  return *std::max_element(clock, clock + threads);
}

}  // namespace

GridPlan plan_grid(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, const GridBlocks& c,
                   int threads) {
  GridPlan best;
  if (m <= 0 || n <= 0 || batch <= 0) return best;
  const std::int64_t depth = std::max<std::int64_t>(k, 1);
  if ((c.fixed_m > 0)) {
    // A fixed-size kernel computes whole matrices, or halves of their rows where there are fewer matrices than
    // threads (1 thread, 64³: 112 GFLOP/s; 2 threads, halves: 174-182): the grid is the batch (times the halves).
    // Below a thread's wake-up cost, one thread.
    const bool halves = batch < threads && c.fixed_row_parts > 1 && batch * m * n * depth >= kPerThread;
    const std::int64_t tiles = batch * (halves ? c.fixed_row_parts : 1);
    const int p = static_cast<int>(std::min<std::int64_t>(threads, tiles));
    const int used = batch * m * n * depth < kPerThread ? 1 : p;
    return {halves ? c.fixed_part_rows : c.mc, c.nc, tiles, used,
            static_cast<double>(ceil_div(tiles, used)) / static_cast<double>(tiles)};
  }
  const TileSizes tms = tile_sizes(m, c.mc, c.mr, threads), tns = tile_sizes(n, c.nc, c.nr, threads);
  if (threads <= 1) {
    // One thread: the largest tiles (fewest B panels packed); nothing to balance.
    return {tms[0], tns[0], TileGrid{m, n, tms[0], tns[0], batch}.count(), 1, 1.0};
  }
  // Between equal estimates: a B read in place from the caches by many rows (not streamed into a few, as by the
  // skinny kernels, mc <= 32) is best kept whole per thread and the rows split (256³ on 2 threads, interleaved
  // with the column split: 213-225 vs 168-199 GFLOP/s); otherwise the columns split, each thread packing only its
  // share of B.
  const bool rows_first = (!c.pack_b && c.mc > 32) || c.rows_first;
  const double work = c.work_scale * static_cast<double>(batch * m * n * depth);
  // Not where B streams from memory into a few rows: narrower tiles would stream it in narrower strips.
  const bool streams_b = !c.pack_b && c.mc <= 32;
  const auto steal_tiles = streams_b
                               ? 0
                               : static_cast<std::int64_t>(std::min(static_cast<double>(kTilesPerThread * threads),
                                                                    std::floor(work / kStealTile)));
  double costs[kMaxPlayedOutTiles];  // per tile, reused across candidates
  GridPlan balanced;                 // the best plan with at least steal_tiles tiles, if there is one
  double best_cost = 0, balanced_cost = 0;
  double alone = 0;  // one thread's estimate with the largest tiles
  for (std::size_t i = 0; i < (rows_first ? tns.count : tms.count); ++i)
    for (std::size_t j = 0; j < (rows_first ? tms.count : tns.count); ++j) {
      const std::int64_t tm = rows_first ? tms[j] : tms[i], tn = rows_first ? tns[i] : tns[j];
      const TileGrid grid{m, n, tm, tn, batch};
      const std::int64_t tiles = grid.count();
      const int p = static_cast<int>(std::min<std::int64_t>(threads, tiles));
      // A packed B panel costs its packing per tile; a B streamed in place into a few rows (the skinny kernels)
      // costs as much from memory, so that two threads stream halves of it rather than all of it each (2 threads,
      // interleaved: 32×4096×4096 107-123 -> 125-134 GFLOP/s, 16×4096×4096 54-97 -> 98-107).
      const bool b_per_tile = c.pack_b || streams_b;
      const bool b_from_memory = c.pack_b && static_cast<double>(depth) * static_cast<double>(n) >= kPackRowElements;
      const auto tile_cost = [&](double rows, double cols) {
        const double d = static_cast<double>(depth);
        return c.work_scale * rows * cols * d + (b_per_tile ? kPackElement : kReadElement) * cols * d +
               (b_from_memory ? kPackRow * d : 0.0) + (c.pack_a ? kPackElement : kReadElement) * rows * d + kPerTile;
      };
      // The tiles at their real extents: counting the edge tiles as whole ones made 34 tiles of 64 columns look
      // cheaper than 8 of 320 for N = 1025, where the fourth of each row has 65 columns (2 threads,
      // 1024×1025×1024: 278 GFLOP/s -> 297, 1088³ 290 -> 314). Few tiles a thread: the pool's schedule played out;
      // many (then claimed in chunks): their mean cost, as stealing evens them out.
      double busiest = 0;
      if (tiles < kPlayedOutTiles * p && tiles <= kMaxPlayedOutTiles) {
        const std::int64_t tiles_m = grid.rows(), tiles_n = grid.cols();
        for (std::int64_t t = 0; t < tiles; ++t)
          costs[static_cast<std::size_t>(t)] =
              tile_cost(static_cast<double>(std::min(tm, m - (t / tiles_n) % tiles_m * tm)),
                        static_cast<double>(std::min(tn, n - t % tiles_n * tn)));
        busiest = pool_makespan(costs, tiles, p);
      } else {
        busiest = static_cast<double>(ceil_div(tiles, p)) *
                  tile_cost(static_cast<double>(m) / static_cast<double>(grid.rows()),
                            static_cast<double>(n) / static_cast<double>(grid.cols()));
      }
      if (i == 0 && j == 0) {  // the largest tiles: one thread's plan (its per-tile costs, no thread to wake)
        if (tiles > kMaxPlayedOutTiles)
          alone = static_cast<double>(tiles) * tile_cost(static_cast<double>(m) / static_cast<double>(grid.rows()),
                                                         static_cast<double>(n) / static_cast<double>(grid.cols()));
        else
          for (std::int64_t t = 0; t < tiles; ++t)
            alone += tile_cost(static_cast<double>(std::min(tm, m - (t / grid.cols()) % grid.rows() * tm)),
                               static_cast<double>(std::min(tn, n - t % grid.cols() * tn)));
      }
      const bool splits_b = rows_first && tn < round_up(n, c.nr);
      const double cost = (busiest + kPerThread * (p - 1)) * (splits_b ? kSplitInPlaceB : 1.0);
      if (best.tiles == 0 || cost < best_cost) {
        best = {tm, tn, tiles, p};
        best_cost = cost;
      }
      const bool wide = (tm >= kStealSide || tm == round_up(m, c.mr)) && (tn >= kStealSide || tn == round_up(n, c.nr));
      if (tiles >= steal_tiles && wide && (balanced.tiles == 0 || cost < balanced_cost)) {
        balanced = {tm, tn, tiles, p};
        balanced_cost = cost;
      }
    }
  const bool steals = best.tiles < steal_tiles && balanced.tiles;
  GridPlan chosen = steals ? balanced : best;
  chosen.time_share = alone > 0 ? std::min(1.0, (steals ? balanced_cost : best_cost) / alone) : 1.0;
  return chosen;
}

}  // namespace tessera
