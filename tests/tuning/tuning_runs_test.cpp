// Merging tuning runs: each measurement the median over the runs that took it.
#include <gtest/gtest.h>

#include "generator/core/error.hpp"
#include "tessera/tuning_records.hpp"

namespace tessera {
namespace {

TuningRecord record(const std::string& hash, double ns, double spread, int samples, const std::string& when,
                    const std::string& version = "0.3.0") {
  GemmProblem p;
  p.m = 2, p.n = 1536, p.k = 1536;
  TuningRecord r;
  r.spec_hash = hash, r.op = "gemm", r.problem = record_problem(p), r.family = "skinny";
  r.signature = "{}", r.config = "{}", r.target = "cpu:avx512", r.hardware = "test host", r.threads = 1;
  r.median_ns = ns, r.spread = spread, r.samples = samples, r.tessera_version = version, r.measured_at = when;
  return r;
}

TEST(TuningRuns, EachMeasurementIsTheMedianOverTheRunsThatTookIt) {
  const std::vector<std::vector<TuningRecord>> runs = {
      {record("a", 100, 0.01, 20, "2026-11-24T09:00:00Z"), record("b", 400, 0.02, 5, "2026-11-24T09:00:01Z")},
      {record("a", 102, 0.03, 20, "2026-11-24T12:00:00Z"), record("b", 150, 0.02, 5, "2026-11-24T12:00:01Z"),
       record("c", 70, 0.05, 1, "2026-11-24T12:00:02Z")},
      {record("a", 110, 0.02, 20, "2026-11-24T11:00:00Z"), record("b", 160, 0.04, 5, "2026-11-24T11:00:01Z")}};
  const auto merged = merge_tuning_runs(runs);
  ASSERT_EQ(merged.size(), 3u);
  // a: runs 100, 102, 110 -> 102; the spread between runs (deviations 2, 0, 8 -> median 2, over 102) is below
  // the runs' own median spread 0.02.
  EXPECT_EQ(merged[0].spec_hash, "a");
  EXPECT_DOUBLE_EQ(merged[0].median_ns, 102);
  EXPECT_DOUBLE_EQ(merged[0].spread, 0.02);
  EXPECT_EQ(merged[0].samples, 60);
  EXPECT_EQ(merged[0].measured_at, "2026-11-24T12:00:00Z");
  // b: the slow first run is outvoted; the spread between runs (median of 240, 10, 0 = 10, over 160) is larger
  // than the runs' own.
  EXPECT_EQ(merged[1].spec_hash, "b");
  EXPECT_DOUBLE_EQ(merged[1].median_ns, 160);
  EXPECT_DOUBLE_EQ(merged[1].spread, 10.0 / 160);
  EXPECT_EQ(merged[1].samples, 15);
  // c: taken by one run only, kept as it was.
  EXPECT_EQ(merged[2].spec_hash, "c");
  EXPECT_DOUBLE_EQ(merged[2].median_ns, 70);
  EXPECT_DOUBLE_EQ(merged[2].spread, 0.05);
  EXPECT_EQ(merged[2].samples, 1);
}

TEST(TuningRuns, AnEvenCountTakesTheMeanOfTheMiddleTwoAndOtherSizesStayApart) {
  TuningRecord other = record("a", 1000, 0.01, 5, "2026-11-24T09:00:00Z");
  GemmProblem p;
  p.m = 3, p.n = 1536, p.k = 1536;
  other.problem = record_problem(p);  // another problem: another measurement
  const auto merged = merge_tuning_runs({{record("a", 100, 0.01, 5, "2026-11-24T09:00:00Z"), other},
                                         {record("a", 200, 0.01, 5, "2026-11-24T10:00:00Z")}});
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_DOUBLE_EQ(merged[0].median_ns, 150);
  EXPECT_DOUBLE_EQ(merged[1].median_ns, 1000);
  EXPECT_EQ(gemm_extents(merged[1]).m, 3);
}

TEST(TuningRuns, ColdAndHotBStayApart) {
  TuningRecord cold = record("a", 300, 0.01, 5, "2026-11-24T10:00:00Z");
  cold.b_cold = true;
  const auto merged = merge_tuning_runs({{record("a", 100, 0.01, 5, "2026-11-24T09:00:00Z")}, {cold}});
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_FALSE(merged[0].b_cold);
  EXPECT_DOUBLE_EQ(merged[0].median_ns, 100);
  EXPECT_TRUE(merged[1].b_cold);
  EXPECT_DOUBLE_EQ(merged[1].median_ns, 300);
}

TEST(TuningRuns, RunsOfDifferentVersionsDoNotMerge) {
  EXPECT_THROW(merge_tuning_runs({{record("a", 100, 0.01, 5, "2026-11-24T09:00:00Z", "0.2.0")},
                                  {record("a", 110, 0.01, 5, "2026-11-24T10:00:00Z", "0.3.0")}}),
               InvalidArgument);
}

}  // namespace
}  // namespace tessera
