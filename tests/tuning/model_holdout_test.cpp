// model holdout: the draw (deterministic, bounded, outside the excluded suites) and a small run's report.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>
#include "generator/core/error.hpp"
#include "tessera/model_holdout.hpp"
#include "tessera/sparse.hpp"
#include "tessera/sparse_holdout.hpp"

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

TEST(SparseHoldout, DrawsAreDeterministicBoundedAndOutsideTheSuites) {
  SparseHoldoutOptions o;
  o.problems = 200;
  o.max_macs = double(1 << 24);
  const auto first = draw_sparse_holdout(o);
  ASSERT_EQ(first.size(), 200u);
  const auto again = draw_sparse_holdout(o);
  for (std::size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i].pattern, again[i].pattern);
  o.excluded = {first[0].pattern + " " + std::to_string(first[0].dense),
                first[9].pattern + " " + std::to_string(first[9].dense)};
  std::set<std::string> kinds, seen;
  for (const SparseHoldoutProblem& p : draw_sparse_holdout(o)) {
    const std::string key = p.pattern + " " + std::to_string(p.dense);
    for (const std::string& x : o.excluded) EXPECT_NE(key, x) << "an excluded case";
    EXPECT_TRUE(seen.insert(key).second) << "drawn twice";
    EXPECT_EQ(p.pattern.substr(0, p.kind.size() + 1), p.kind + ":");
    EXPECT_GE(p.dense, 8);
    EXPECT_LE(p.dense, 1024);
    kinds.insert(p.kind);
    // The pattern generator takes every drawn request.
    if (seen.size() <= 3) {
      EXPECT_GT(generate_pattern(p.pattern).row.size(), 0u) << p.pattern;
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"uniform", "powerlaw", "banded", "blocks"}));
  o.op = "sddmm";
  for (const SparseHoldoutProblem& p : draw_sparse_holdout(o)) EXPECT_LE(p.dense, 512);
  o.op = "gemm";
  EXPECT_THROW(draw_sparse_holdout(o), InvalidArgument);
}

// A run per op: every regret is against the fastest variant timed beside the pick, so none is negative, and a pick
// without regret is the best variant.
TEST(SparseHoldout, ReportsTheRuntimesPickAgainstTheWholeSpace) {
  Runtime runtime({"cpu", 1});
  for (const char* op : {"spmm", "sddmm"}) {
    SparseHoldoutOptions o;
    o.op = op;
    o.problems = 1;
    o.max_macs = 2e5;
    o.timing.samples = 1;
    o.timing.sample_ms = 0.05;
    const nlohmann::json r = sparse_holdout(runtime, o, nullptr);
    ASSERT_EQ(r["cases"].size(), 1u) << op;
    for (const auto& c : r["cases"]) {
      for (const char* field : {"regret", "regret_retest", "analytic_regret", "noise_floor"})
        EXPECT_GE(c[field].get<double>(), 0.0) << op << " " << field;
      EXPECT_GT(c["variants"].get<int>(), 1) << op;
      EXPECT_GT(c["best_gflops"].get<double>(), 0.0) << op;
      EXPECT_EQ(c["regret"].get<double>() == 0.0, c["pick"] == c["best"]) << op << " " << c.dump();
    }
    EXPECT_EQ(r["by_kind"][r["cases"][0]["kind"].get<std::string>()]["problems"].get<int>(), 1) << op;
  }
}

}  // namespace
}  // namespace tessera
