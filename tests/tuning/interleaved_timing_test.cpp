// The tuner's measurement protocol on synthetic variants of known cost: calibration, the 4x rule, interleaved rounds
// on fresh operands, refinement of the near-best.
#include "ops/tuning/interleaved_timing.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "generator/core/arith.hpp"

namespace tessera {
namespace {

void spin_us(double us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

TEST(InterleavedTiming, RanksByCostAndDropsTheFarSlower) {
  const std::vector<double> cost_us{40, 20, 400, 22};
  std::vector<unsigned> seeds;
  const auto make_round = [&](unsigned seed) {
    seeds.push_back(seed);
    TimingRound round;
    round.operands = std::make_shared<int>(static_cast<int>(seed));
    round.prepare = [&cost_us](std::size_t i) -> std::function<void()> { return [us = cost_us[i]] { spin_us(us); }; };
    return round;
  };
  TimingOptions options;
  options.samples = 3;
  options.sample_ms = 0.5;
  options.refine_samples = 2;
  options.refine_within = 0.5;
  int last_done = 0, last_total = 0;
  const auto samples = time_interleaved(cost_us.size(), make_round, options, 1, [&](int done, int total) {
    EXPECT_EQ(last_done + 1, done);
    last_done = done, last_total = total;
  });
  ASSERT_EQ(cost_us.size(), samples.size());
  // 10x slower than the fastest: its calibration is its one sample.
  EXPECT_EQ(1u, samples[2].size());
  // The two near-best (20, 22 µs; 40 is not within 50% of 20) get the refinement rounds.
  EXPECT_EQ(3u, samples[0].size());
  EXPECT_EQ(5u, samples[1].size());
  EXPECT_EQ(5u, samples[3].size());
  EXPECT_EQ(last_total, last_done);
  EXPECT_EQ(3 * 3 + 2 * 2, last_done);
  for (std::size_t i = 0; i < cost_us.size(); ++i)
    EXPECT_GE(median(samples[i]), cost_us[i] * 1e3 * 0.95) << "variant " << i;  // a spin never ends early
  EXPECT_LT(median(samples[1]), median(samples[0]));
  EXPECT_LT(median(samples[0]), median(samples[2]));
  // Calibration on seed 17, then one fresh allocation per round: 18, 19, 20, then 21, 22 for the refinement.
  EXPECT_EQ((std::vector<unsigned>{17, 18, 19, 20, 21, 22}), seeds);
}

TEST(InterleavedTiming, NoVariantsNoRounds) {
  int rounds = 0;
  const auto samples = time_interleaved(
      0, [&](unsigned) { return ++rounds, TimingRound{}; }, TimingOptions{}, 1);
  EXPECT_TRUE(samples.empty());
  EXPECT_EQ(0, rounds);
}

}  // namespace
}  // namespace tessera
