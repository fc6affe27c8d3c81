// model holdout: the draw (deterministic, bounded, outside the excluded suites) and a small run's report.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include <nlohmann/json.hpp>
#include "generator/core/error.hpp"
#include "tessera/model_holdout.hpp"

namespace tessera {
namespace {

TEST(ModelHoldout, DrawsAreDeterministicBoundedAndOutsideTheSuites) {
  HoldoutOptions o;
  o.shapes = 200;
  o.max_dim = 512;
  o.max_macs = double(1 << 24);
  const auto first = draw_holdout_shapes(o);
  ASSERT_EQ(first.size(), 200u);
  // The same seed draws the same shapes; excluding some of them draws others in their place.
  const auto again = draw_holdout_shapes(o);
  for (std::size_t i = 0; i < first.size(); ++i)
    EXPECT_EQ(std::tie(first[i].m, first[i].n, first[i].k), std::tie(again[i].m, again[i].n, again[i].k));
  o.excluded = {first[0], first[5], first[17]};
  const auto excluded = draw_holdout_shapes(o);
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
  int skinny = 0;
  for (const SuiteShape& s : excluded) {
    for (const SuiteShape& x : o.excluded) EXPECT_FALSE(s.m == x.m && s.n == x.n && s.k == x.k) << "an excluded shape";
    EXPECT_TRUE(seen.insert({s.m, s.n, s.k}).second) << "drawn twice";
    EXPECT_LE(double(s.m) * double(s.n) * double(s.k), o.max_macs);
    if (s.family == "skinny") {
      ++skinny;
      EXPECT_TRUE(s.m >= 1 && s.m <= 64 && s.n >= 256 && s.n <= 4096 && s.k >= 256 && s.k <= 4096);
    } else {
      EXPECT_TRUE(s.m >= o.min_dim && s.m <= o.max_dim && s.n >= o.min_dim && s.n <= o.max_dim && s.k >= o.min_dim &&
                  s.k <= o.max_dim);
    }
  }
  EXPECT_GT(skinny, 25);  // a quarter of 200, give or take
  EXPECT_LT(skinny, 80);
  o.seed = 2;
  EXPECT_NE(draw_holdout_shapes(o)[0].m * 100000 + draw_holdout_shapes(o)[0].k, first[0].m * 100000 + first[0].k);
  o.shapes = 0;
  EXPECT_THROW(draw_holdout_shapes(o), InvalidArgument);
}

// A small run: every regret is measured against the fastest variant timed beside the pick, so none is negative, and
// every pick is counted under its path.
TEST(ModelHoldout, ReportsTheRuntimesPickAgainstTheWholeSpace) {
  HoldoutOptions o;
  o.shapes = 2;
  o.skinny_share = 0;
  o.max_dim = 20;
  o.timing.samples = 1;
  o.timing.sample_ms = 0.05;
  Runtime runtime({"cpu", 1});
  const nlohmann::json r = model_holdout(runtime, o, nullptr);
  ASSERT_EQ(r["problems"].size(), 2u);
  int picks = 0;
  for (const auto& [path, count] : r["paths"].items()) picks += count.get<int>();
  EXPECT_EQ(picks, 2);
  for (const auto& p : r["problems"]) {
    for (const char* field : {"regret", "regret_retest", "default_regret", "analytic_regret", "noise_floor"})
      EXPECT_GE(p[field].get<double>(), 0.0) << field;
    EXPECT_GT(p["variants"].get<int>(), 1);
    EXPECT_GT(p["best_gflops"].get<double>(), 0.0);
  }
  for (const char* field : {"runtime", "runtime_retest", "default", "analytic", "learned", "noise_floor"})
    EXPECT_GE(r[field]["top1_regret_max"].get<double>(), r[field]["top1_regret_mean"].get<double>()) << field;
}

}  // namespace
}  // namespace tessera
