#include "ops/grid_plan.hpp"

#include <algorithm>

namespace tessera {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// Costs in multiply-adds of one core (about 140 G/s here): packing one element of B, the fixed cost of a tile,
// and of waking and joining one more thread.
constexpr double kPackElement = 16;
constexpr double kPerTile = 30'000;
constexpr double kPerThread = 200'000;

}  // namespace

GridPlan plan_grid(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, const CpuGemmConfig& c,
                   int threads) {
  GridPlan best;
  if (m <= 0 || n <= 0 || batch <= 0) return best;
  const std::int64_t depth = std::max<std::int64_t>(k, 1);
  if (c.fixed()) {
    // A fixed-size kernel computes whole matrices: the grid is the batch.
    const int p = static_cast<int>(std::min<std::int64_t>(threads, batch));
    return {c.mc, c.nc, batch, batch * m * n * depth < 200'000 ? 1 : p};
  }
  if (threads <= 1) {
    // One thread: the largest tiles (fewest B panels packed); nothing to balance.
    const std::int64_t tm = std::min<std::int64_t>(c.mc, round_up(m, c.mr));
    const std::int64_t tn = std::min<std::int64_t>(c.nc, round_up(n, c.nr));
    return {tm, tn, batch * ceil_div(m, tm) * ceil_div(n, tn), 1};
  }
  double best_cost = 0;
  for (std::int64_t tm = std::min<std::int64_t>(c.mc, round_up(m, c.mr));; tm = round_up(tm / 2, c.mr)) {
    for (std::int64_t tn = std::min<std::int64_t>(c.nc, round_up(n, c.nr));; tn = round_up(tn / 2, c.nr)) {
      const std::int64_t tiles = batch * ceil_div(m, tm) * ceil_div(n, tn);
      const int p = static_cast<int>(std::min<std::int64_t>(threads, tiles));
      const double per_tile = static_cast<double>(tm * tn * depth) +
                              (c.pack_b ? kPackElement * static_cast<double>(tn * depth) : 0.0) + kPerTile;
      const double cost = static_cast<double>(ceil_div(tiles, p)) * per_tile + kPerThread * (p - 1);
      if (best.tiles == 0 || cost < best_cost) {
        best = {tm, tn, tiles, p};
        best_cost = cost;
      }
      if (tn <= c.nr) break;
    }
    if (tm <= c.mr) break;
  }
  return best;
}

}  // namespace tessera
