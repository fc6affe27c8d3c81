// model holdout: the draw (deterministic, bounded, outside the excluded suites) and a small run's report.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>
#include "generator/core/error.hpp"
#include "tessera/model_holdout.hpp"
#include "tessera/op_holdout.hpp"
#include "tessera/sparse.hpp"

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

TEST(OpHoldout, DrawsAreDeterministicBoundedAndOutsideTheSuites) {
  OpHoldoutOptions o;
  o.problems = 200;
  o.max_macs = double(1 << 24);
  const auto first = draw_op_holdout(o);
  ASSERT_EQ(first.size(), 200u);
  const auto again = draw_op_holdout(o);
  for (std::size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i].key(), again[i].key());
  o.excluded = {first[0].key(), first[9].key()};
  std::set<std::string> kinds, seen;
  for (const HoldoutProblem& p : draw_op_holdout(o)) {
    const std::string key = p.key();
    for (const std::string& x : o.excluded) EXPECT_NE(key, x) << "an excluded case";
    EXPECT_TRUE(seen.insert(key).second) << "drawn twice";
    EXPECT_EQ(p.text.substr(0, p.kind.size() + 1), p.kind + ":");
    EXPECT_GE(p.dense, 8);
    EXPECT_LE(p.dense, 1024);
    kinds.insert(p.kind);
    // The pattern generator takes every drawn request.
    if (seen.size() <= 3) {
      EXPECT_GT(generate_pattern(p.text).row.size(), 0u) << p.text;
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"uniform", "powerlaw", "banded", "blocks"}));
  o.op = "sddmm";
  for (const HoldoutProblem& p : draw_op_holdout(o)) EXPECT_LE(p.dense, 512);
  o.op = "gemm";
  EXPECT_THROW(draw_op_holdout(o), InvalidArgument);
}

// Attention draws: prefill and decoding, heads a multiple of the KV heads, work within the bound.
TEST(OpHoldout, AttentionDrawsAreBoundedAndOutsideTheSuite) {
  OpHoldoutOptions o;
  o.op = "attention";
  o.problems = 200;
  o.max_macs = double(1 << 28);
  const auto first = draw_op_holdout(o);
  o.excluded = {first[3].key()};
  std::set<std::string> kinds;
  for (const HoldoutProblem& p : draw_op_holdout(o)) {
    EXPECT_NE(p.key(), first[3].key());
    long long b = 0, h = 0, kv = 0, sq = 0, skv = 0;
    int d = 0;
    ASSERT_EQ(std::sscanf(p.text.c_str(), "%lldx%lld/%lldx%lld:%lld d%d", &b, &h, &kv, &sq, &skv, &d), 6) << p.text;
    EXPECT_EQ(h % kv, 0) << p.text;
    const bool causal = p.text.find("causal") != std::string::npos;
    EXPECT_LE(2.0 * double(b * h * sq * skv * d) * (causal ? 0.5 : 1.0), o.max_macs) << p.text;
    if (p.kind == "decode") {
      EXPECT_LE(sq, 8) << p.text;
    }
    kinds.insert(p.kind);
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"prefill", "decode"}));
}

// A run per op: every regret is against the fastest variant timed beside the pick, so none is negative, and a pick
// without regret is the best variant.
TEST(OpHoldout, ReportsTheRuntimesPickAgainstTheWholeSpace) {
  Runtime runtime({"cpu", 1});
  for (const char* op : {"spmm", "sddmm", "attention"}) {
    OpHoldoutOptions o;
    o.op = op;
    o.problems = 1;
    o.max_macs = std::string(op) == "attention" ? 1e6 : 2e5;
    o.timing.samples = 1;
    o.timing.sample_ms = 0.05;
    const nlohmann::json r = op_holdout(runtime, o, nullptr);
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
