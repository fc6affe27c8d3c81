// Fused attention against the double-precision reference: lengths, causal alignment, GQA/MQA, variable lengths,
// score modifiers, masked rows, large logits, layouts and strides, both ISAs and thread counts, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <tuple>

#include "generator/attention/attention_json.hpp"
#include "generator/core/arith.hpp"
#include "generator/cost/attention_cost.hpp"
#include "ops/attention/attention_binding.hpp"
#include "ops/attention/attention_schedule.hpp"
#include "tessera/reference.hpp"
#include "tessera/tessera.hpp"
#include "tessera/tuner.hpp"

namespace tessera {
namespace {

// An owned [batch, heads, seq, dim] tensor stored BHSD or BSHD (or, varlen, [total, heads, dim]), with padding
// between rows that holds NaN so any read of it shows, and an optional element stride along dim.
struct Heads {
  std::vector<float> storage;
  Tensor view;

  Heads(std::int64_t batch, std::int64_t heads, std::int64_t seq, std::int64_t dim, bool bshd,
        std::int64_t dim_stride = 1, std::int64_t pad = 5) {
    const std::int64_t row = dim * dim_stride + pad;  // one (seq or head) row
    std::vector<std::int64_t> strides(4);
    strides[3] = dim_stride;
    if (bshd) {
      strides[2] = heads * row, strides[1] = row, strides[0] = seq * heads * row + pad;
    } else {
      strides[2] = row, strides[1] = seq * row + pad, strides[0] = heads * (seq * row + pad) + pad;
    }
    storage.assign(static_cast<std::size_t>(std::max<std::int64_t>(1, batch * strides[0] + pad)),
                   std::numeric_limits<float>::quiet_NaN());
    view.data = storage.data();
    view.shape = {batch, heads, seq, dim};
    view.strides = strides;
  }
  // Varlen: [total, heads, dim].
  static Heads packed(std::int64_t total, std::int64_t heads, std::int64_t dim) {
    Heads t(1, heads, total, dim, true);
    t.view.shape = {total, heads, dim};
    t.view.strides = {t.view.strides[2], t.view.strides[1], t.view.strides[3]};
    return t;
  }
  template <class F>
  void each(F f) {
    std::vector<std::int64_t> index(view.rank(), 0);
    const auto total = [&] {
      std::int64_t n = 1;
      for (auto e : view.shape) n *= e;
      return n;
    }();
    for (std::int64_t flat = 0; flat < total; ++flat) {
      std::int64_t rest = flat, offset = 0;
      for (std::size_t d = view.rank(); d-- > 0;) {
        offset += (rest % view.shape[d]) * view.strides[d];
        rest /= view.shape[d];
      }
      f(storage[static_cast<std::size_t>(offset)]);
    }
  }
  void fill(std::mt19937& rng, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> dist(lo, hi);
    each([&](float& x) { x = dist(rng); });
  }
  void set(float value) {
    each([&](float& x) { x = value; });
  }
};

struct Case {
  std::int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 16, seq_kv = 16, d = 64, dv = 64;
  bool causal = false, bshd = false, lse = true;
  std::int64_t dim_stride = 1;
  float range = 1;  // inputs uniform in [-range, range]
};

struct Owned {
  Heads q, k, v, o;
  Heads lse_storage;
  AttentionArgs args;
};

std::unique_ptr<Owned> make(const Case& c, std::uint32_t seed = 7) {
  std::mt19937 rng(seed);
  auto t = std::unique_ptr<Owned>(new Owned{Heads(c.batch, c.heads, c.seq_q, c.d, c.bshd, c.dim_stride),
                                            Heads(c.batch, c.kv_heads, c.seq_kv, c.d, c.bshd, c.dim_stride),
                                            Heads(c.batch, c.kv_heads, c.seq_kv, c.dv, c.bshd, c.dim_stride),
                                            Heads(c.batch, c.heads, c.seq_q, c.dv, c.bshd, c.dim_stride),
                                            Heads(1, c.batch, c.heads, c.seq_q, false),
                                            {}});
  t->q.fill(rng, -c.range, c.range);
  t->k.fill(rng, -c.range, c.range);
  t->v.fill(rng);
  t->args.q = t->q.view, t->args.k = t->k.view, t->args.v = t->v.view, t->args.o = t->o.view;
  t->args.causal = c.causal;
  if (c.lse) {
    t->lse_storage.view.shape = {c.batch, c.heads, c.seq_q};
    t->lse_storage.view.strides = {t->lse_storage.view.strides[1], t->lse_storage.view.strides[2],
                                   t->lse_storage.view.strides[3]};
    t->args.lse = t->lse_storage.view;
  }
  return t;
}

// A packed varlen batch ([total, heads, 64]) with the given cumulative offsets, random Q, K and V.
struct Varlen {
  Heads q, k, v, o;
  AttentionArgs args;
  Varlen(std::vector<std::int64_t> q_offsets, std::vector<std::int64_t> kv_offsets, std::int64_t heads,
         std::int64_t kv_heads, std::uint32_t seed)
      : q(Heads::packed(q_offsets.back(), heads, 64)),
        k(Heads::packed(kv_offsets.back(), kv_heads, 64)),
        v(Heads::packed(kv_offsets.back(), kv_heads, 64)),
        o(Heads::packed(q_offsets.back(), heads, 64)) {
    std::mt19937 rng(seed);
    q.fill(rng), k.fill(rng), v.fill(rng);
    args.q = q.view, args.k = k.view, args.v = v.view, args.o = o.view;
    args.seq_offsets_q = std::move(q_offsets), args.seq_offsets_kv = std::move(kv_offsets);
  }
};

Runtime& runtime(const std::string& target = "cpu") {
  static std::map<std::string, std::unique_ptr<Runtime>> runtimes;
  auto& r = runtimes[target];
  if (!r) {
    RuntimeOptions o;
    o.target = target;
    o.threads = 2;
    r = std::make_unique<Runtime>(o);
  }
  return *r;
}

void expect_matches(Runtime& rt, const AttentionArgs& args, const std::string& what) {
  const AttentionReference ref = reference_attention(args);
  const AttentionKernel kernel = rt.compile(rt.describe(args));
  kernel.run(args);
  const Comparison c = compare_attention(ref, args, kernel.weight_rounding());
  EXPECT_TRUE(c.ok()) << what << ": " << c.mismatches << " mismatches, first " << c.first_mismatch << " (max abs err "
                      << c.max_abs_err << ")";
}

// Runs `config` on the case's tensors (O poisoned first) and compares O with `ref`; `what` names the case.
void expect_config_matches(Runtime& rt, const AttentionProblem& problem, const CpuAttentionConfig& config, Owned& t,
                           const AttentionReference& ref, const std::string& what) {
  t.o.set(-7);
  rt.compile(problem, config).run(t.args);
  const Comparison cmp = compare_attention(ref, t.args);
  EXPECT_TRUE(cmp.ok()) << what << " " << to_json(config).dump() << ": " << cmp.first_mismatch;
}

std::string describe(const Case& c) {
  return "B" + std::to_string(c.batch) + " H" + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " Sq" +
         std::to_string(c.seq_q) + " Skv" + std::to_string(c.seq_kv) + " d" + std::to_string(c.d) + "/" +
         std::to_string(c.dv) + (c.causal ? " causal" : "") + (c.bshd ? " bshd" : " bhsd");
}

TEST(Attention, LengthsCausalAndNot) {
  for (std::int64_t len : {1, 7, 63, 65, 127, 1000})
    for (bool causal : {false, true}) {
      Case c;
      c.seq_q = c.seq_kv = len;
      c.causal = causal;
      c.heads = len > 200 ? 1 : 2;
      auto t = make(c);
      expect_matches(runtime(), t->args, describe(c));
    }
}

TEST(Attention, CausalAlignedBottomRight) {
  // seq_q < seq_kv: every query sees a prefix longer than its index; seq_q > seq_kv: the first rows see no key.
  for (auto [sq, skv] : std::vector<std::pair<int, int>>{{37, 100}, {100, 37}, {1, 50}, {50, 1}, {130, 129}}) {
    Case c;
    c.seq_q = sq, c.seq_kv = skv, c.causal = true, c.heads = 3;
    auto t = make(c);
    expect_matches(runtime(), t->args, describe(c));
  }
}

TEST(Attention, GroupedAndMultiQuery) {
  for (auto [h, g] : std::vector<std::pair<int, int>>{{8, 2}, {4, 1}, {6, 3}}) {
    Case c;
    c.batch = 2, c.heads = h, c.kv_heads = g, c.seq_q = 33, c.seq_kv = 70, c.bshd = true;
    auto t = make(c);
    expect_matches(runtime(), t->args, describe(c));
  }
}

TEST(Attention, HeadDimsLayoutsAndStrides) {
  const std::vector<std::pair<int, int>> dims{{64, 64}, {128, 128}, {96, 96}, {64, 32}, {40, 72}, {3, 5}, {256, 256}};
  for (auto [d, dv] : dims)
    for (bool bshd : {false, true}) {
      Case c;
      c.d = d, c.dv = dv, c.bshd = bshd, c.seq_q = 50, c.seq_kv = 90, c.heads = 2;
      auto t = make(c);
      expect_matches(runtime(), t->args, describe(c));
    }
  Case c;  // the head dimension strided (every other float)
  c.dim_stride = 2, c.seq_q = 40, c.seq_kv = 45, c.causal = true;
  auto t = make(c);
  expect_matches(runtime(), t->args, describe(c) + " dim stride 2");
}

TEST(Attention, BothIsasAndThreadCounts) {
  for (const char* target : {"cpu:avx2", "cpu:avx512"}) {
    if (std::string(target) == "cpu:avx512" && !CpuTarget::host_supports(CpuIsa::Avx512)) continue;
    for (int threads : {1, 2}) {
      Case c;
      c.batch = 2, c.heads = 3, c.seq_q = 140, c.seq_kv = 150, c.causal = threads == 2;
      auto t = make(c);
      t->args.threads = threads;
      expect_matches(runtime(target), t->args, describe(c) + " " + target + " threads " + std::to_string(threads));
    }
  }
}

TEST(Attention, VariableLengthsWithEmptySequences) {
  const std::vector<std::int64_t> q_offsets{0, 5, 5, 70, 71, 171}, kv_offsets{0, 9, 20, 20, 90, 290};
  for (bool causal : {false, true}) {
    Varlen t(q_offsets, kv_offsets, 4, 2, 3);
    Heads lse(1, 1, 4, q_offsets.back(), false);
    lse.view.shape = {4, q_offsets.back()};
    lse.view.strides = {lse.view.strides[2], 1};
    t.args.lse = lse.view, t.args.causal = causal;
    expect_matches(runtime(), t.args, causal ? "varlen causal" : "varlen");
  }
}

TEST(Attention, ScoreModifiers) {
  Case c;
  c.heads = 2, c.seq_q = 100, c.seq_kv = 120, c.causal = false;
  std::vector<float> slope{0.25f, 0.0625f}, bias(2 * 300);
  std::mt19937 rng(5);
  for (float& x : bias) x = std::uniform_real_distribution<float>(-2, 2)(rng);
  struct Mod {
    const char* text;
    bool causal;
  };
  for (const Mod& m : {Mod{"s - slope[h]*(i - j)", true}, Mod{"30*tanh(s/30)", false},
                       Mod{"s + bias[h, i - j + 150]", false}, Mod{"j < i - 16 ? -inf : s", true},
                       Mod{"j > i + 5 ? -inf : (j < i - 5 ? -inf : s*temperature)", false}, Mod{"b + h + s", false}}) {
    Case mc = c;
    mc.causal = m.causal;
    auto t = make(mc);
    t->args.set_score_mod(m.text);
    for (const auto& use : t->args.score_mod.tensors()) {
      if (use.name == "slope") t->args.tensors["slope"] = Tensor{slope.data(), DType::f32, {2}, {1}};
      if (use.name == "bias") t->args.tensors["bias"] = Tensor{bias.data(), DType::f32, {2, 300}, {300, 1}};
    }
    for (const auto& name : t->args.score_mod.scalars()) t->args.scalars[name] = 0.7f;
    expect_matches(runtime(), t->args, std::string(m.text) + (m.causal ? " causal" : ""));
  }
}

// Sliding windows over sequences of several key blocks: the blocks the window masks for every row of a call are
// skipped (proven by interval bounds of the condition), and the result must not change.
TEST(Attention, WindowModifiersSkipMaskedBlocks) {
  for (const char* text : {"j < i - 100 ? -inf : s", "j > i + 60 ? -inf : (j < i - 60 ? -inf : s)"})
    for (bool causal : {false, true}) {
      Case c;
      c.heads = 2, c.seq_q = 900, c.seq_kv = 1300, c.causal = causal;
      auto t = make(c);
      t->args.set_score_mod(text);
      expect_matches(runtime(), t->args, std::string(text) + (causal ? " causal" : ""));
    }
  // The proof itself: a call's rows [0, 95] with a window of 100 see no key of block [512, 767] nor, causally...
  AttentionBlockArgs a;
  a.rows = 96, a.i0 = 400, a.seq_q = 2000, a.seq_kv = 2000;
  skip_masked_key_blocks(a, ScoreModifier::parse("j < i - 100 ? -inf : s"), 256);
  EXPECT_EQ(a.kv_begin, 256) << "keys below 300 are masked for rows 400-495";
  EXPECT_EQ(a.kv_stop, 2000);
  skip_masked_key_blocks(a, ScoreModifier::parse("j > i + 60 ? -inf : s"), 256);
  EXPECT_EQ(a.kv_begin, 0);
  EXPECT_EQ(a.kv_stop, 768) << "keys above 555 are masked for rows 400-495";
  a.kv_begin = 0, a.kv_stop = INT64_MAX;
  skip_masked_key_blocks(a, ScoreModifier::parse("j == i ? -inf : s"), 256);  // not provable: nothing skipped
  EXPECT_EQ(a.kv_begin, 0);
  EXPECT_EQ(a.kv_stop, 2000);
}

TEST(Attention, FullyMaskedRowsGiveZeros) {
  Case c;
  c.seq_q = 20, c.seq_kv = 30;
  auto t = make(c);
  t->args.set_score_mod("j >= 0 ? -inf : s");
  runtime().attention(t->args);
  t->o.each([](float x) { EXPECT_EQ(x, 0.0f); });
  t->lse_storage.each([](float x) { EXPECT_TRUE(std::isinf(x) && x < 0) << x; });
  expect_matches(runtime(), t->args, "every score masked");
}

TEST(Attention, LargeLogitsDoNotOverflow) {
  Case c;
  c.seq_q = 70, c.seq_kv = 90, c.d = 64, c.range = 40;  // |scores| up to ~1e4
  for (bool causal : {false, true}) {
    c.causal = causal;
    auto t = make(c);
    expect_matches(runtime(), t->args, describe(c) + " logits ~1e4");
    t->o.each([](float x) { EXPECT_TRUE(std::isfinite(x)); });
  }
}

// Every config of the variant space, on a problem that takes several query and key blocks of each.
TEST(Attention, EveryVariantConfig) {
  for (const char* target : {"cpu:avx2", "cpu:avx512"}) {
    if (std::string(target) == "cpu:avx512" && !CpuTarget::host_supports(CpuIsa::Avx512)) continue;
    Runtime& rt = runtime(target);
    for (bool causal : {false, true}) {
      Case c;
      c.heads = 2, c.seq_q = 203, c.seq_kv = 301, c.d = 40, c.dv = 24, c.causal = causal;
      auto t = make(c);
      const AttentionReference ref = reference_attention(t->args);
      const AttentionProblem problem = rt.describe(t->args);
      const auto variants = cpu_attention_variants(problem, rt.target());
      EXPECT_GE(variants.size(), 10u);
      for (const CpuAttentionConfig& config : variants) {
        expect_config_matches(rt, problem, config, *t, ref, std::string(target) + (causal ? " causal" : ""));
      }
    }
  }
}

// Decoding: a few query rows against a long KV cache, read in place (no packing), every in-place variant.
TEST(Attention, DecodingReadsKeysInPlace) {
  for (const char* target : {"cpu:avx2", "cpu:avx512"}) {
    if (std::string(target) == "cpu:avx512" && !CpuTarget::host_supports(CpuIsa::Avx512)) continue;
    Runtime& rt = runtime(target);
    for (std::int64_t sq : {1, 3, 8})
      for (bool causal : {false, true}) {
        Case c;
        c.heads = 4, c.kv_heads = 2, c.seq_q = sq, c.seq_kv = 1100 + sq, c.d = 100, c.dv = 72, c.causal = causal;
        c.bshd = sq == 3;
        auto t = make(c);
        const AttentionReference ref = reference_attention(t->args);
        const AttentionProblem problem = rt.describe(t->args);
        const auto variants = cpu_attention_variants(problem, rt.target());
        ASSERT_TRUE(variants.front().in_place) << describe(c);
        // Both kinds of prefetch are in the space (which one pays depends on the core).
        EXPECT_TRUE(std::any_of(variants.begin(), variants.end(), [&](const CpuAttentionConfig& v) {
          return v.in_place && v.prefetch_l2 != variants.front().prefetch_l2;
        })) << describe(c);
        for (const CpuAttentionConfig& config : variants) {
          if (!config.in_place) continue;
          expect_config_matches(rt, problem, config, *t, ref, std::string(target) + " " + describe(c));
        }
      }
  }
}

// A one-row tile takes each vector of its other operand once, as an FMA's memory operand: on AVX2's 16 registers
// it holds 8 accumulators and a broadcast, so a decoding head of d 128 reads its V rows in 2 column tiles, not 4.
// Taller tiles hold the other operand's vectors too.
TEST(Attention, OneRowTilesTakeTheirVectorsFromMemory) {
  const CpuTarget avx2 = CpuTarget::named("cpu:avx2");
  Case c;
  c.heads = c.kv_heads = 4, c.seq_q = 1, c.seq_kv = 600, c.d = c.dv = 128;
  auto t = make(c);
  const AttentionProblem problem = runtime("cpu:avx2").describe(t->args);
  CpuAttentionConfig one_row = CpuAttentionConfig::default_for(problem, avx2);
  ASSERT_TRUE(one_row.in_place);
  EXPECT_EQ(one_row.mr, 1);
  EXPECT_EQ(one_row.nv, 8);
  EXPECT_NO_THROW(validate(problem.signature, one_row, avx2));
  CpuAttentionConfig two_rows = one_row.with_overrides("mr=2,nv=6,block_q=2");  // 12 + 6 + 1 registers
  EXPECT_THROW(validate(problem.signature, two_rows, avx2), ConfigError);
  EXPECT_NO_THROW(validate(problem.signature, one_row.with_overrides("mr=2,nv=5,block_q=2,block_kv=240"), avx2));
  const AttentionReference ref = reference_attention(t->args);
  expect_config_matches(runtime("cpu:avx2"), problem, one_row, *t, ref, "1x8 in place, avx2");
}

// Grouped-query decoding stacks a KV head's query heads as one block's rows, `positions` rows per head: the
// modifier's h and i, the causal bound and the Q, O and LSE rows must follow each row's head and position, in place
// and packed.
TEST(Attention, GroupedQueryDecodingStacksHeads) {
  for (auto [heads, kv_heads, seq_q] : std::vector<std::tuple<int, int, int>>{
           {8, 2, 1}, {32, 2, 1}, {6, 1, 1}, {8, 2, 3}, {6, 2, 8}, {16, 2, 5}, {64, 2, 3}})
    for (bool bshd : {false, true}) {
      Case c;
      c.batch = 2, c.heads = heads, c.kv_heads = kv_heads, c.seq_q = seq_q, c.seq_kv = 700, c.causal = true;
      c.bshd = bshd;
      auto t = make(c);
      t->args.set_score_mod("s - slope[h]*(i - j)");
      std::vector<float> slopes(static_cast<std::size_t>(heads), 0.05f);
      for (int h = 0; h < heads; ++h) slopes[static_cast<std::size_t>(h)] = 0.002f * static_cast<float>(h + 1);
      t->args.tensors["slope"] = Tensor{slopes.data(), DType::f32, {heads}, {1}};
      const AttentionProblem problem = runtime().describe(t->args);
      const CpuAttentionConfig config = CpuAttentionConfig::default_for(problem, runtime().target());
      // Stacked up to 64 rows (24 read in place, more in packed tiles); a taller group runs its heads unstacked.
      const int rows = heads / kv_heads * seq_q;
      EXPECT_EQ(stacks_query_heads(problem, config.block_q), rows <= 64) << describe(c);
      EXPECT_EQ(config.in_place, rows <= 24) << describe(c);
      expect_matches(runtime(), t->args, describe(c) + " default");
      // The same stacked block read in place and packed, in tiles of other heights.
      const AttentionReference ref = reference_attention(t->args);
      // (4x4 needs 21 registers: AVX2 has 16.)
      const char* tall = runtime().target().isa == CpuIsa::Avx512 ? "in_place=0,mr=4,nv=4" : "in_place=0,mr=4,nv=2";
      for (const char* text : {"in_place=1,mr=3,nv=2", "in_place=0,mr=6,nv=2", tall}) {
        CpuAttentionConfig other = config.with_overrides(text);
        other.block_q = static_cast<int>(round_up(rows, other.mr));
        expect_config_matches(runtime(), problem, other, *t, ref, describe(c));
      }
    }
  // Variable lengths with an empty sequence: one query or none per sequence still stacks.
  expect_matches(runtime(), Varlen({0, 1, 1, 2}, {0, 300, 310, 900}, 8, 2, 9).args, "varlen stacked");
  // Sequences of 3, 0 and 2 queries: each batch item's blocks stack its own number of positions per head.
  Varlen mixed({0, 3, 3, 5}, {0, 400, 410, 1000}, 8, 2, 4);
  mixed.args.causal = true;
  EXPECT_TRUE(stacks_query_heads(runtime().describe(mixed.args), 12));
  expect_matches(runtime(), mixed.args, "varlen stacked, 3/0/2 queries, causal");
}

// Flash-decoding: a call with fewer blocks than two per thread, or with its heads' key rows a page apart (BSHD), runs
// each block's keys in chunks and merges them by their log-sum-exp. Chunks with every key masked for some rows (causal,
// a window), an empty and a short sequence, LSE on and off, must all merge to the unsplit result.
TEST(Attention, SplitKeysMergeToTheUnsplitResult) {
  struct Split {
    std::int64_t batch, heads, kv_heads, seq_q, seq_kv;
    bool bshd, causal;
    const char* mod;
  };
  for (const Split& sc : std::vector<Split>{{1, 4, 1, 1, 3000, false, false, "s"},
                                            {1, 8, 8, 1, 2100, true, false, "s"},
                                            {1, 8, 2, 3, 1500, false, true, "j < i - 700 ? -inf : s"},
                                            {1, 2, 2, 5, 1300, false, true, "s"},
                                            {1, 2, 1, 2, 1200, false, false, "j >= 0 ? -inf : s"},
                                            {1, 32, 1, 1, 3000, false, false, "s"},
                                            {1, 32, 1, 2, 2000, true, true, "s"}})
    for (bool lse : {true, false}) {
      Case c;
      c.batch = sc.batch, c.heads = sc.heads, c.kv_heads = sc.kv_heads, c.seq_q = sc.seq_q, c.seq_kv = sc.seq_kv;
      c.bshd = sc.bshd, c.causal = sc.causal, c.lse = lse, c.d = c.dv = 128;
      auto t = make(c);
      t->args.set_score_mod(sc.mod);
      const AttentionBinding bound = bind_attention(t->args);
      const CpuAttentionConfig config = CpuAttentionConfig::default_for(bound.problem, runtime().target());
      const std::int64_t blocks = stacks_query_heads(bound.problem, config.block_q)
                                      ? c.batch * c.kv_heads
                                      : c.batch * c.heads * ceil_div(c.seq_q, config.block_q);
      const std::int64_t chunk =
          key_chunk_length(bound.call(), blocking_of({bound.problem.signature, config, runtime().target()}), blocks, 2);
      EXPECT_GT(chunk, 0) << describe(c) << ": not split";
      EXPECT_EQ(chunk % config.block_kv, 0);
      expect_matches(runtime(), t->args, describe(c) + " " + sc.mod + (lse ? " lse" : "") + " split");
    }
  // Variable lengths: an empty key sequence, one shorter than a chunk, one of several chunks.
  expect_matches(runtime(), Varlen({0, 1, 2, 3}, {0, 0, 100, 2600}, 4, 1, 3).args, "varlen split");
  // What splits: enough blocks for the threads and contiguous rows not; rows a page apart do when read in place; a
  // packed config only for the threads (one stacked block of multi-query attention).
  Case many;
  many.heads = many.kv_heads = 8, many.seq_q = 1, many.seq_kv = 5000, many.d = many.dv = 128;
  for (bool bshd : {false, true}) {
    many.bshd = bshd;
    auto m = make(many);
    const AttentionBinding bound = bind_attention(m->args);
    CpuAttentionConfig config = CpuAttentionConfig::default_for(bound.problem, runtime().target());
    const auto blocking = [&] { return blocking_of({bound.problem.signature, config, runtime().target()}); };
    EXPECT_EQ(key_chunk_length(bound.call(), blocking(), 8, 2) > 0, bshd) << describe(many);
    config.in_place = false;
    EXPECT_EQ(key_chunk_length(bound.call(), blocking(), 8, 2), 0) << "a packed config split for the TLB";
    EXPECT_GT(key_chunk_length(bound.call(), blocking(), 1, 2), 0) << "one packed block on two threads not split";
  }
}

// The tuner times the analytic model's top variants (default_for first) and keeps the fastest; a runtime with a tuning
// budget runs the tuned kernel, which must still be right.
TEST(Attention, TunerAndTuningBudget) {
  Case c;
  c.heads = 2, c.seq_q = 300, c.seq_kv = 300, c.causal = true;
  auto t = make(c);
  Runtime& rt = runtime();
  const AttentionProblem problem = rt.describe(t->args);
  TuneOptions options;
  options.top_k = 3, options.samples = 2, options.sample_ms = 0.5;
  const AttentionTuneResult r = tune_attention(rt, problem, options);
  EXPECT_EQ(r.space, cpu_attention_variants(problem, rt.target()).size());
  ASSERT_EQ(r.measured.size(), 3u);
  EXPECT_EQ(r.measured[0].config, CpuAttentionConfig::default_for(problem, rt.target()));
  for (const auto& m : r.measured) EXPECT_LE(r.measured[r.best].median_ns, m.median_ns);

  RuntimeOptions tuned_options;
  tuned_options.threads = 2, tuned_options.tuning_budget = 2;
  Runtime tuned(tuned_options);
  const CpuAttentionConfig chosen = tuned.choose_config(problem);
  EXPECT_EQ(tuned.choose_config(problem), chosen) << "tuned once per shape";
  expect_matches(tuned, t->args, "tuning budget 2");
}

// The analytic model: decoding is bandwidth-bound (reading keys in place beats packing them), and long prefill
// prefers the larger register tile.
TEST(Attention, AnalyticModelRanksTheObviousCases) {
  const CpuTarget target = CpuTarget::named("cpu:avx512");
  AttentionProblem decode;
  decode.heads = 32, decode.kv_heads = 32, decode.seq_q = 1, decode.seq_kv = 16384;
  decode.signature.head_dim_qk = decode.signature.head_dim_v = 128;
  CpuAttentionConfig in_place = CpuAttentionConfig::default_for(decode, target), packed = in_place;
  ASSERT_TRUE(in_place.in_place);
  packed.in_place = false;
  EXPECT_LT(attention_cycles(decode, in_place, target), attention_cycles(decode, packed, target));
  AttentionProblem prefill = decode;
  prefill.seq_q = 4096, prefill.seq_kv = 4096;
  CpuAttentionConfig big = CpuAttentionConfig::default_for(prefill, target), small = big;
  small.mr = 2, small.nv = 2, small.block_q = 96, small.block_kv = 256;
  EXPECT_LT(attention_cycles(prefill, big, target), attention_cycles(prefill, small, target));
}

// Decoding groups too tall to stack (more than 64 rows a KV head) run a block per query head, in tiles of 6 rows where
// they pad less than tiles of 4 (5 and 6 queries), and match the reference.
TEST(Attention, TallGroupsUnstackInTilesThatPadLeast) {
  for (const auto& [sq, mr] : std::vector<std::array<int, 2>>{{5, 6}, {6, 6}, {7, 4}, {3, 4}}) {
    Case c;
    c.heads = 26, c.kv_heads = 1, c.seq_q = sq, c.seq_kv = 700, c.causal = sq % 2 == 1, c.d = c.dv = 64;
    auto t = make(c);
    const AttentionProblem problem = runtime().describe(t->args);
    const CpuAttentionConfig config = CpuAttentionConfig::default_for(problem, CpuTarget::named("cpu:avx512"));
    EXPECT_EQ(config.mr, mr) << describe(c);
    EXPECT_FALSE(stacks_query_heads(problem, config.block_q)) << describe(c);
    expect_matches(runtime(), t->args, describe(c));
  }
}

// A tall stacked block whose f32 keys come from memory (d ≥ 128, K and V beyond twice the L2) reads them in place;
// one whose keys stay in cache, or of d 64, packs them. The in-place choice must still match the reference.
TEST(Attention, TallGroupsReadKeysFromMemoryInPlace) {
  for (const char* isa : {"cpu:avx2", "cpu:avx512"}) {
    if (std::string(isa) == "cpu:avx512" && !CpuTarget::host_supports(CpuIsa::Avx512)) continue;
    // The rule with an L2 of 1 MiB; the run below with one of 256 KiB.
    CpuTarget target = runtime(isa).target();
    target.l2_bytes = 1 << 20;
    for (const auto& [skv, d, in_place] : std::vector<std::tuple<int, int, bool>>{
             {32768, 128, true}, {4096, 128, true}, {2048, 128, false}, {32768, 64, false}}) {
      Case c;
      c.heads = 32, c.kv_heads = 1, c.seq_q = 1, c.seq_kv = skv, c.d = c.dv = d;
      auto t = make(c);
      const AttentionProblem problem = runtime(isa).describe(t->args);
      const CpuAttentionConfig config = CpuAttentionConfig::default_for(problem, target);
      EXPECT_EQ(config.in_place, in_place) << isa << " " << describe(c);
      EXPECT_TRUE(stacks_query_heads(problem, config.block_q)) << isa << " " << describe(c);
      if (in_place) {
        EXPECT_EQ(config.mr, 4) << isa << " " << describe(c);
      }
    }
    // The in-place stacked block of 32 rows against the reference (keys past one block, a partial last block).
    Case c;
    c.batch = 2, c.heads = 32, c.kv_heads = 1, c.seq_q = 1, c.seq_kv = 1100, c.d = c.dv = 128;
    auto t = make(c);
    const AttentionProblem problem = runtime(isa).describe(t->args);
    target.l2_bytes = 256 << 10;
    const CpuAttentionConfig config = CpuAttentionConfig::default_for(problem, target);
    ASSERT_TRUE(config.in_place && config.block_q == 32) << isa << " " << to_json(config).dump();
    const AttentionReference ref = reference_attention(t->args);
    expect_config_matches(runtime(isa), problem, config, *t, ref, isa);
  }
}

// A few query rows of one head (a short continuation, not stacked) read their keys in place: on AVX-512 up to 32 rows,
// 64 where f32 keys of d ≥ 128 come from memory; on AVX2 16 rows only where the keys come from memory. Then an
// in-place block of causal rows (27 on AVX-512, 13 on AVX2; the diagonal inside it, keys past one block) against the
// reference.
TEST(Attention, ShortContinuationsReadKeysInPlace) {
  for (const char* isa : {"cpu:avx2", "cpu:avx512"}) {
    if (std::string(isa) == "cpu:avx512" && !CpuTarget::host_supports(CpuIsa::Avx512)) continue;
    const bool wide = std::string(isa) == "cpu:avx512";
    CpuTarget target = runtime(isa).target();
    target.l2_bytes = 1 << 20;
    struct Expect {
      int heads, seq_q, seq_kv, d;
      bool avx512, avx2;
    };
    for (const Expect& e : std::vector<Expect>{{8, 16, 8192, 128, true, true},
                                               {8, 16, 1024, 128, true, false},
                                               {8, 32, 8192, 128, true, false},
                                               {8, 32, 1024, 128, true, false},
                                               {8, 24, 1024, 64, true, false},
                                               {8, 64, 8192, 128, true, false},
                                               {8, 64, 512, 128, false, false},
                                               {8, 64, 8192, 64, false, false},
                                               {32, 16, 8192, 128, true, true}}) {
      Case c;
      c.heads = e.heads, c.kv_heads = 8, c.seq_q = e.seq_q, c.seq_kv = e.seq_kv, c.d = c.dv = e.d;
      auto t = make(c);
      const AttentionProblem problem = runtime(isa).describe(t->args);
      const CpuAttentionConfig config = CpuAttentionConfig::default_for(problem, target);
      EXPECT_EQ(config.in_place, wide ? e.avx512 : e.avx2) << isa << " " << describe(c);
      EXPECT_FALSE(stacks_query_heads(problem, config.block_q)) << isa << " " << describe(c);
    }
    Case c;
    c.batch = 2, c.heads = 2, c.kv_heads = 2, c.seq_q = wide ? 27 : 13, c.seq_kv = 1100, c.d = c.dv = 128;
    c.causal = true;
    auto t = make(c);
    const AttentionProblem problem = runtime(isa).describe(t->args);
    target.l2_bytes = 256 << 10;
    const CpuAttentionConfig config = CpuAttentionConfig::default_for(problem, target);
    ASSERT_TRUE(config.in_place && config.block_q >= c.seq_q) << isa << " " << to_json(config).dump();
    const AttentionReference ref = reference_attention(t->args);
    expect_config_matches(runtime(isa), problem, config, *t, ref, isa);
  }
}

// A head of up to 256 query rows whose keys outgrow twice the L2 runs as one packed block (keys packed for several
// blocks leave the caches before those read them), chosen by default_for and not by the analytic model; then such a
// block of 130 causal rows against the reference.
TEST(Attention, ShortPrefillAgainstLongKeysTakesOneBlockPerHead) {
  for (const char* isa : {"cpu:avx2", "cpu:avx512"}) {
    if (std::string(isa) == "cpu:avx512" && !CpuTarget::host_supports(CpuIsa::Avx512)) continue;
    CpuTarget target = runtime(isa).target();
    target.l2_bytes = 1 << 20;
    for (const auto& [seq_q, seq_kv, one_block] : std::vector<std::tuple<int, int, bool>>{
             {128, 4096, true}, {256, 16384, true}, {200, 2048, false}, {300, 8192, false}}) {
      Case c;
      c.heads = 8, c.kv_heads = 8, c.seq_q = seq_q, c.seq_kv = seq_kv, c.d = c.dv = 128;
      auto t = make(c);
      const AttentionProblem problem = runtime(isa).describe(t->args);
      const CpuAttentionConfig config = CpuAttentionConfig::default_for(problem, target);
      EXPECT_FALSE(config.in_place) << isa << " " << describe(c);
      EXPECT_EQ(config.block_q >= seq_q, one_block) << isa << " " << describe(c) << ": " << to_json(config).dump();
      if (one_block && keys_outgrow_l2(problem, runtime(isa).target())) {
        EXPECT_EQ(runtime(isa).choose_config(problem), CpuAttentionConfig::default_for(problem, runtime(isa).target()))
            << isa << " " << describe(c);
      }
    }
    Case c;
    c.batch = 2, c.heads = 2, c.kv_heads = 1, c.seq_q = 130, c.seq_kv = 1100, c.d = c.dv = 128, c.causal = true;
    auto t = make(c);
    const AttentionProblem problem = runtime(isa).describe(t->args);
    target.l2_bytes = 256 << 10;
    const CpuAttentionConfig config = CpuAttentionConfig::default_for(problem, target);
    ASSERT_TRUE(!config.in_place && config.block_q >= 130) << isa << " " << to_json(config).dump();
    const AttentionReference ref = reference_attention(t->args);
    expect_config_matches(runtime(isa), problem, config, *t, ref, isa);
  }
}

// bf16 Q, K, V and O (f32 softmax and accumulation): each tensor's values rounded to bf16 in a copy with the same
// strides; the reference reads the same bf16 values and allows O's rounding to 8 bits.
struct Bf16Copy {
  std::vector<std::uint16_t> storage;
  Tensor view;
  explicit Bf16Copy(const Heads& h) : storage(h.storage.size()), view(h.view) {
    for (std::size_t i = 0; i < storage.size(); ++i) storage[i] = to_bf16(h.storage[i]);
    view.data = storage.data();
    view.dtype = DType::bf16;
  }
};

TEST(Attention, Bf16TensorsWithF32Softmax) {
  for (const char* target : {"cpu:avx2", "cpu:avx512"}) {
    if (std::string(target) == "cpu:avx512" && !CpuTarget::host_supports(CpuIsa::Avx512)) continue;
    for (auto [sq, skv, d, dv, heads, kv_heads, causal, bshd] :
         std::vector<std::tuple<int, int, int, int, int, int, bool, bool>>{{1, 300, 64, 64, 4, 2, false, false},
                                                                           {100, 300, 64, 72, 4, 2, true, true},
                                                                           {130, 130, 128, 128, 2, 2, true, false},
                                                                           {7, 600, 96, 96, 3, 1, false, true},
                                                                           {1, 2500, 100, 72, 8, 2, true, true},
                                                                           {3, 1100, 64, 64, 4, 4, false, false}}) {
      Case c;
      c.seq_q = sq, c.seq_kv = skv, c.d = d, c.dv = dv, c.heads = heads, c.kv_heads = kv_heads, c.causal = causal;
      c.bshd = bshd;
      auto t = make(c);
      Bf16Copy q(t->q), k(t->k), v(t->v), o(t->o);
      AttentionArgs args = t->args;
      args.q = q.view, args.k = k.view, args.v = v.view, args.o = o.view;
      expect_matches(runtime(target), args, std::string(target) + " bf16 " + describe(c));
      // Decoding reads bf16 K and V in place (vdpbf16ps dot tiles where the target has avx512_bf16, else widened),
      // but for stacked blocks of 8 rows or more where the target has AMX tiles.
      const AttentionProblem problem = runtime(target).describe(args);
      const auto variants = cpu_attention_variants(problem, runtime(target).target());
      const bool amx_stacked = runtime(target).target().amx && heads != kv_heads && heads / kv_heads * sq >= 8;
      EXPECT_EQ(variants.front().in_place, sq <= 8 && !amx_stacked) << describe(c);
      if (sq <= 8) {
        EXPECT_EQ(variants.front().amx == CpuAttentionConfig::kAmxTiles, amx_stacked) << describe(c);
      }
      const AttentionReference ref = reference_attention(args);
      // Every variant (of two cases): in place (decoding), packed (vdpbf16ps products on pairs where the target has
      // avx512_bf16, widened otherwise).
      for (const CpuAttentionConfig& config : variants) {
        if (sq != 1 && sq != 100) break;
        const AttentionKernel kernel = runtime(target).compile(problem, config);
        EXPECT_EQ(kernel.weight_rounding() > 0, config.grouped(problem.signature, runtime(target).target()));
        kernel.run(args);
        const Comparison cmp = compare_attention(ref, args, kernel.weight_rounding());
        EXPECT_TRUE(cmp.ok()) << target << " bf16 " << describe(c) << " " << to_json(config).dump() << ": "
                              << cmp.first_mismatch;
      }
    }
  }
  // Mixed types are refused, naming the tensor.
  Case c;
  auto t = make(c);
  Bf16Copy k(t->k);
  AttentionArgs mixed = t->args;
  mixed.k = k.view;
  try {
    runtime().attention(mixed);
    ADD_FAILURE() << "mixed f32 and bf16 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), "k") << e.what();
  }
}

// bf16 on AMX tiles: S = Q·Kᵀ and O += P·V as tile products. The emulated tiles (amx = 2, the instructions' effect in
// vector code) run on any host with avx512_bf16, the native ones where AMX is; both against the reference, over
// lengths that are and are not multiples of a tile, causal both ways, GQA and MQA, head dims that need padding to a
// tile row, a score modifier, varlen with an empty sequence and both tile shapes; native and emulated results
// within one bf16 step of each other (and near 0, of 2^-12 of O's largest value).
TEST(Attention, AmxTilesMatchTheReference) {
  if (!CpuTarget::host_supports(CpuIsa::Avx512)) GTEST_SKIP() << "host lacks AVX-512";
  Runtime& rt = runtime("cpu:avx512");
  if (!rt.target().avx512_bf16) GTEST_SKIP() << "host lacks avx512_bf16";
  const bool native = CpuTarget::host_amx_missing().empty();
  struct Shape {
    int sq, skv, d, dv, heads, kv_heads;
    bool causal;
    const char* mod;
  };
  for (const Shape& shape : std::vector<Shape>{{1, 7, 64, 64, 2, 2, false, ""},
                                               {63, 65, 64, 64, 2, 1, true, ""},
                                               {127, 1000, 128, 128, 4, 2, true, ""},
                                               {300, 100, 32, 32, 2, 2, true, ""},
                                               {65, 300, 96, 72, 3, 1, false, "30*tanh(s/30)"},
                                               {100, 257, 40, 64, 2, 2, false, "j < i - 50 ? -inf : s"},
                                               {3, 1000, 128, 128, 12, 3, true, ""},
                                               {5, 300, 64, 64, 8, 2, false, ""}}) {
    Case c;
    c.seq_q = shape.sq, c.seq_kv = shape.skv, c.d = shape.d, c.dv = shape.dv, c.heads = shape.heads;
    c.kv_heads = shape.kv_heads, c.causal = shape.causal, c.bshd = shape.sq % 2 == 1, c.range = 2;
    auto t = make(c);
    Bf16Copy q(t->q), k(t->k), v(t->v), o(t->o);
    AttentionArgs args = t->args;
    args.q = q.view, args.k = k.view, args.v = v.view, args.o = o.view;
    if (*shape.mod) args.set_score_mod(shape.mod);
    const AttentionReference ref = reference_attention(args);
    const AttentionProblem problem = rt.describe(args);
    for (const auto& [mr, nv, block_q, block_kv] :
         std::vector<std::array<int, 4>>{{32, 2, 64, 256}, {16, 2, 32, 64}, {32, 1, 32, 128}, {16, 2, 16, 256}}) {
      CpuAttentionConfig config;
      config.mr = mr, config.nv = nv, config.block_q = block_q, config.block_kv = block_kv;
      std::vector<std::uint16_t> emulated;
      for (const int amx : {CpuAttentionConfig::kAmxEmulated, CpuAttentionConfig::kAmxTiles}) {
        if (amx == CpuAttentionConfig::kAmxTiles && !native) continue;
        config.amx = amx;
        const std::string what = describe(c) + " " + shape.mod + " " + to_json(config).dump();
        std::fill(o.storage.begin(), o.storage.end(), to_bf16(std::numeric_limits<float>::quiet_NaN()));
        const AttentionKernel kernel = rt.compile(problem, config);
        kernel.run(args);
        const Comparison cmp = compare_attention(ref, args, kernel.weight_rounding());
        EXPECT_TRUE(cmp.ok()) << what << ": " << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
        if (amx == CpuAttentionConfig::kAmxEmulated) {
          emulated = o.storage;
          continue;
        }
        // Within one bf16 step of each other (and near 0, of 2^-12 of O's largest value: a sum's rounding follows
        // its terms, not what is left of them): the hardware orders a tile step's sums and flushes denormals its own
        // way (on integer inputs the two are equal bit for bit: GemmAmx); the structure is the same.
        float scale = 0;
        for (const std::uint16_t e : emulated)
          if (!std::isnan(from_bf16(e))) scale = std::max(scale, std::abs(from_bf16(e)));
        for (std::size_t i = 0; i < emulated.size(); ++i) {
          const float x = from_bf16(o.storage[i]), y = from_bf16(emulated[i]);
          if (std::isnan(x) || std::isnan(y)) {
            ASSERT_EQ(std::isnan(x), std::isnan(y)) << what << " at " << i;
            continue;
          }
          ASSERT_LE(std::abs(x - y), std::max(std::abs(x), std::abs(y)) * 0x1p-7f + scale * 0x1p-12f)
              << what << ": native " << x << " emulated " << y;
        }
      }
    }
  }
  // Stacked grouped-query decoding of 8-24 rows: on AMX tiles by default where the host has them, one tile of 16 rows
  // for 12 (four query heads of three positions), of 32 for 20.
  if (native)
    for (const auto& [sq, heads, kv_heads, mr] : std::vector<std::array<int, 4>>{{3, 32, 8, 16}, {5, 32, 8, 32}}) {
      AttentionProblem decode;
      decode.heads = heads, decode.kv_heads = kv_heads, decode.seq_q = sq, decode.seq_kv = 4096;
      decode.signature.head_dim_qk = decode.signature.head_dim_v = 128;
      decode.signature.dtype = DType::bf16;
      const CpuAttentionConfig config = CpuAttentionConfig::default_for(decode, rt.target());
      EXPECT_EQ(config.amx, CpuAttentionConfig::kAmxTiles) << to_json(config).dump();
      EXPECT_EQ(config.mr, mr) << to_json(config).dump();
      EXPECT_TRUE(stacks_query_heads(decode, config.block_q)) << to_json(config).dump();
    }
  // Varlen with an empty sequence, causal.
  Varlen t({0, 40, 40, 140}, {0, 70, 70, 170}, 4, 2, 3);
  Bf16Copy q(t.q), k(t.k), v(t.v), o(t.o);
  AttentionArgs args = t.args;
  args.q = q.view, args.k = k.view, args.v = v.view, args.o = o.view, args.causal = true;
  const AttentionReference ref = reference_attention(args);
  CpuAttentionConfig config;
  config.mr = 32, config.nv = 2, config.block_q = 64, config.block_kv = 64;
  config.amx = native ? CpuAttentionConfig::kAmxTiles : CpuAttentionConfig::kAmxEmulated;
  const AttentionKernel kernel = rt.compile(rt.describe(args), config);
  kernel.run(args);
  const Comparison cmp = compare_attention(ref, args, kernel.weight_rounding());
  EXPECT_TRUE(cmp.ok()) << "varlen: " << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
}

TEST(Attention, ScaleIsHonoured) {
  Case c;
  c.seq_q = 100, c.seq_kv = 150;
  for (float scale : {0.01f, -0.2f, 1.5f}) {
    auto t = make(c);
    t->args.scale = scale;
    expect_matches(runtime(), t->args, "scale " + std::to_string(scale));
  }
}

// Bad input: a tessera::Error naming the argument, and O untouched.
void expect_refused(AttentionArgs args, Owned& t, const std::string& argument) {
  t.o.set(123.0f);
  try {
    runtime().attention(args);
    ADD_FAILURE() << "accepted; expected an error naming " << argument;
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
  t.o.each([](float x) { EXPECT_EQ(x, 123.0f); });
}

TEST(Attention, BadInputIsRefusedAndWritesNothing) {
  Case c;
  c.heads = 3, c.kv_heads = 2;
  auto t = make(c);
  expect_refused(t->args, *t, "k");  // heads not a multiple of kv_heads

  c.heads = 2, c.kv_heads = 1;
  t = make(c);
  AttentionArgs a = t->args;
  a.k.shape[3] = 32;
  expect_refused(a, *t, "k");  // head_dim differs from q's
  a = t->args;
  a.o.shape[2] = 15;
  expect_refused(a, *t, "o");
  a = t->args;
  a.o.strides[2] = 1;  // rows overlap
  expect_refused(a, *t, "o");
  a = t->args;
  a.o = a.q;  // o is q
  expect_refused(a, *t, "o");
  a = t->args;
  a.q.dtype = a.k.dtype = a.v.dtype = a.o.dtype = DType::f16;  // no CPU kernel for f16
  expect_refused(a, *t, "q");
  a = t->args;
  a.q.dtype = DType::bf16;  // K, V and O are still f32
  expect_refused(a, *t, "k");
  a = t->args;
  a.q.strides.pop_back();
  expect_refused(a, *t, "q");
  a = t->args;
  a.set_score_mod("s + bias[h]");
  expect_refused(a, *t, "score_mod");  // bias not given
  a.tensors["bias"] = Tensor{nullptr, DType::f32, {2, 2}, {2, 1}};
  expect_refused(a, *t, "tensors[bias]");  // rank 2 for one index
  a = t->args;
  a.scalars["unused"] = 1;
  expect_refused(a, *t, "scalars[unused]");
  a = t->args;
  a.scale = std::numeric_limits<float>::infinity();
  expect_refused(a, *t, "scale");
  a = t->args;
  a.lse.shape[2] = 3;
  expect_refused(a, *t, "lse");

  // Variable lengths that do not add up.
  auto q = Heads::packed(10, 2, 64), k = Heads::packed(12, 1, 64), v = Heads::packed(12, 1, 64),
       o = Heads::packed(10, 2, 64);
  AttentionArgs vl;
  vl.q = q.view, vl.k = k.view, vl.v = v.view, vl.o = o.view;
  vl.seq_offsets_q = {0, 4, 9}, vl.seq_offsets_kv = {0, 6, 12};
  EXPECT_THROW(
      {
        try {
          runtime().attention(vl);
        } catch (const InvalidArgument& e) {
          EXPECT_EQ(e.argument(), "seq_offsets_q") << e.what();
          throw;
        }
      },
      InvalidArgument);
  vl.seq_offsets_q = {0, 4, 10}, vl.seq_offsets_kv = {0, 7, 5};
  EXPECT_THROW(runtime().attention(vl), InvalidArgument);

  // Modifier text errors name the column.
  try {
    AttentionArgs m;
    m.set_score_mod("s + * 2");
    ADD_FAILURE() << "parsed";
  } catch (const ScoreModifierError& e) {
    EXPECT_EQ(e.column(), 5u) << e.what();
  }
}

// Peak resident memory, in bytes, since the last reset_peak_memory().
std::int64_t peak_memory() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}
bool reset_peak_memory() { return static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5"); }

// Memory O(S·d): one head of 65,536 queries and keys (causal) runs in under 100 MB beyond its tensors (the scores
// alone would be 16 GiB); sampled rows checked against a double-precision softmax computed here.
TEST(Attention, LongSequenceRunsInLinearMemory) {
  Case c;
  c.seq_q = c.seq_kv = 65536, c.causal = true, c.lse = false, c.d = c.dv = 64;
  auto t = make(c);
  t->o.set(0);  // touch every page of O before the baseline
  runtime();    // the pool and the JIT exist before the baseline
  ASSERT_TRUE(reset_peak_memory());
  const std::int64_t before = peak_memory();
  runtime().attention(t->args);
  const std::int64_t extra = peak_memory() - before;
  EXPECT_LT(extra, 100 << 20) << "peak memory grew by " << extra << " bytes";
  const Tensor &q = t->args.q, &k = t->args.k, &v = t->args.v, &o = t->args.o;
  const auto at = [](const Tensor& x, std::int64_t row, std::int64_t d) {
    return static_cast<const float*>(x.data)[row * x.strides[2] + d * x.strides[3]];
  };
  for (std::int64_t i : {0, 1, 4097, 65535}) {
    std::vector<double> w(static_cast<std::size_t>(i + 1));
    double max = -INFINITY, sum = 0;
    for (std::int64_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (std::int64_t d = 0; d < 64; ++d) dot += double(at(q, i, d)) * at(k, j, d);
      w[static_cast<std::size_t>(j)] = dot / 8;
      max = std::max(max, dot / 8);
    }
    for (double& x : w) sum += (x = std::exp(x - max));
    for (std::int64_t d = 0; d < 64; ++d) {
      double want = 0;
      for (std::int64_t j = 0; j <= i; ++j) want += w[static_cast<std::size_t>(j)] * at(v, j, d);
      EXPECT_NEAR(at(o, i, d), want / sum, 1e-5) << "row " << i << ", d " << d;
    }
  }
}

TEST(Attention, KernelReportsWorkspaceIndependentOfLength) {
  Case c;
  auto t = make(c);
  const AttentionProblem small = runtime().describe(t->args);
  AttentionProblem big = small;
  big.seq_q = big.seq_kv = 65536;
  const AttentionKernel a = runtime().compile(small, CpuAttentionConfig::default_for(big, runtime().target()));
  const AttentionKernel b = runtime().compile(big);
  EXPECT_EQ(a.workspace_bytes(), b.workspace_bytes());
  EXPECT_LT(b.workspace_bytes(), 1 << 20);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The bad-input matrix for attention (issue 37): one valid call broken one way per row; each must end in an
// InvalidArgument naming the argument, with O untouched and no signal.
struct BadAttentionCase {
  const char* what;
  const char* argument;
  std::function<void(AttentionArgs&, Owned&)> breaks;
};

TEST(AttentionBadInput, Matrix) {
  static std::vector<float> small(64, 1.0f);
  const auto tensor1 = [](std::int64_t n) { return Tensor{small.data(), DType::f32, {n}, {1}}; };
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max() / 4;
  const std::vector<BadAttentionCase> cases{
      {"q rank 3", "q", [](AttentionArgs& a, Owned&) { a.q.shape.pop_back(), a.q.strides.pop_back(); }},
      {"k rank 5", "k", [](AttentionArgs& a, Owned&) { a.k.shape.push_back(1), a.k.strides.push_back(1); }},
      {"v rank 2", "v",
       [](AttentionArgs& a, Owned&) {
         a.v.shape = {4, 4}, a.v.strides = {4, 1};
       }},
      {"o strides short", "o", [](AttentionArgs& a, Owned&) { a.o.strides.pop_back(); }},
      {"q negative extent", "q", [](AttentionArgs& a, Owned&) { a.q.shape[2] = -1; }},
      {"k negative extent", "k", [](AttentionArgs& a, Owned&) { a.k.shape[2] = -4; }},
      {"q negative stride", "q", [](AttentionArgs& a, Owned&) { a.q.strides[2] = -64; }},
      {"v negative stride", "v", [](AttentionArgs& a, Owned&) { a.v.strides[3] = -1; }},
      {"q null data", "q", [](AttentionArgs& a, Owned&) { a.q.data = nullptr; }},
      {"k null data", "k", [](AttentionArgs& a, Owned&) { a.k.data = nullptr; }},
      {"v null data", "v", [](AttentionArgs& a, Owned&) { a.v.data = nullptr; }},
      {"o null data", "o", [](AttentionArgs& a, Owned&) { a.o.data = nullptr; }},
      {"k batch differs", "k", [](AttentionArgs& a, Owned&) { a.k.shape[0] = 2; }},
      {"v batch differs", "v", [](AttentionArgs& a, Owned&) { a.v.shape[0] = 3; }},
      {"o batch differs", "o", [](AttentionArgs& a, Owned&) { a.o.shape[0] = 2; }},
      {"k head_dim differs", "k", [](AttentionArgs& a, Owned&) { a.k.shape[3] = 63; }},
      {"v heads differ from k", "v", [](AttentionArgs& a, Owned&) { a.v.shape[1] = 1; }},
      {"v seq differs from k", "v", [](AttentionArgs& a, Owned&) { a.v.shape[2] -= 1; }},
      {"o heads differ", "o", [](AttentionArgs& a, Owned&) { a.o.shape[1] = 1; }},
      {"o seq differs", "o", [](AttentionArgs& a, Owned&) { a.o.shape[2] += 1; }},
      {"o head_dim differs from v", "o", [](AttentionArgs& a, Owned&) { a.o.shape[3] = 32; }},
      {"heads not a multiple", "k", [](AttentionArgs& a, Owned&) { a.k.shape[1] = 3, a.v.shape[1] = 3; }},
      {"no kv heads", "k", [](AttentionArgs& a, Owned&) { a.k.shape[1] = 0, a.v.shape[1] = 0; }},
      {"head_dim 0", "q", [](AttentionArgs& a, Owned&) { a.q.shape[3] = 0, a.k.shape[3] = 0; }},
      {"head_dim 1000", "q", [](AttentionArgs& a, Owned&) { a.q.shape[3] = 1000, a.k.shape[3] = 1000; }},
      {"o rows overlap", "o", [](AttentionArgs& a, Owned&) { a.o.strides[2] = 1; }},
      {"o heads overlap", "o", [](AttentionArgs& a, Owned&) { a.o.strides[1] = 0; }},
      {"o is q", "o", [](AttentionArgs& a, Owned&) { a.o.data = a.q.data; }},
      {"o is k", "o", [](AttentionArgs& a, Owned&) { a.o.data = a.k.data, a.o.strides = a.k.strides; }},
      {"o is v", "o", [](AttentionArgs& a, Owned&) { a.o.data = a.v.data; }},
      {"f16 on the CPU", "q",
       [](AttentionArgs& a, Owned&) { a.q.dtype = a.k.dtype = a.v.dtype = a.o.dtype = DType::f16; }},
      {"q f16 beside f32", "k", [](AttentionArgs& a, Owned&) { a.q.dtype = DType::f16; }},
      {"q i8", "q", [](AttentionArgs& a, Owned&) { a.q.dtype = DType::i8; }},
      {"q out-of-range dtype", "dtype", [](AttentionArgs& a, Owned&) { a.q.dtype = static_cast<DType>(77); }},
      {"k bf16 beside f32", "k", [](AttentionArgs& a, Owned&) { a.k.dtype = DType::bf16; }},
      {"o bf16 beside f32", "o", [](AttentionArgs& a, Owned&) { a.o.dtype = DType::bf16; }},
      {"scale inf", "scale", [](AttentionArgs& a, Owned&) { a.scale = std::numeric_limits<float>::infinity(); }},
      {"scale nan", "scale", [](AttentionArgs& a, Owned&) { a.scale = std::nanf(""); }},
      {"threads negative", "threads", [](AttentionArgs& a, Owned&) { a.threads = -1; }},
      {"lse rank 2", "lse", [](AttentionArgs& a, Owned&) { a.lse.shape.pop_back(), a.lse.strides.pop_back(); }},
      {"lse wrong heads", "lse", [](AttentionArgs& a, Owned&) { a.lse.shape[1] = 1; }},
      {"lse f16", "lse", [](AttentionArgs& a, Owned&) { a.lse.dtype = DType::f16; }},
      {"lse overlaps o", "lse", [](AttentionArgs& a, Owned&) { a.lse.data = a.o.data; }},
      {"lse rows overlap", "lse", [](AttentionArgs& a, Owned&) { a.lse.strides[2] = 0; }},
      {"lse null", "lse", [](AttentionArgs& a, Owned&) { a.lse.data = nullptr; }},
      {"modifier tensor missing", "score_mod", [](AttentionArgs& a, Owned&) { a.set_score_mod("s + t[h]"); }},
      {"modifier scalar missing", "score_mod", [](AttentionArgs& a, Owned&) { a.set_score_mod("s * temperature"); }},
      {"modifier tensor unused", "tensors[x]", [&](AttentionArgs& a, Owned&) { a.tensors["x"] = tensor1(4); }},
      {"modifier scalar unused", "scalars[x]", [](AttentionArgs& a, Owned&) { a.scalars["x"] = 1; }},
      {"modifier tensor rank", "tensors[t]",
       [&](AttentionArgs& a, Owned&) {
         a.set_score_mod("s + t[h]");
         a.tensors["t"] = Tensor{small.data(), DType::f32, {2, 2}, {2, 1}};
       }},
      {"modifier tensor f16", "tensors[t]",
       [&](AttentionArgs& a, Owned&) {
         a.set_score_mod("s + t[h]");
         a.tensors["t"] = tensor1(4);
         a.tensors["t"].dtype = DType::f16;
       }},
      {"modifier tensor null", "tensors[t]",
       [&](AttentionArgs& a, Owned&) {
         a.set_score_mod("s + t[h]");
         a.tensors["t"] = Tensor{nullptr, DType::f32, {4}, {1}};
       }},
      {"modifier read past the end", "tensors[t]",
       [&](AttentionArgs& a, Owned&) {
         a.set_score_mod("s + t[j]");  // j < 24, t has 8
         a.tensors["t"] = tensor1(8);
       }},
      {"modifier read negative", "tensors[t]",
       [&](AttentionArgs& a, Owned&) {
         a.set_score_mod("s + t[i - j]");
         a.tensors["t"] = tensor1(64);
       }},
      {"modifier index with a division (not in the index language)", "score_mod",
       [&](AttentionArgs& a, Owned&) {
         a.set_score_mod("s + t[i / (j - 3)]");
         a.tensors["t"] = tensor1(64);
       }},
      {"modifier index huge", "tensors[t]",
       [&](AttentionArgs& a, Owned&) {
         a.set_score_mod("s + t[j * 100000000000]");
         a.tensors["t"] = tensor1(64);
       }},
      {"modifier tensor rank mismatch between reads", "score_mod",
       [&](AttentionArgs& a, Owned&) { a.set_score_mod("s + t[h] + t[h, j]"); }},
      {"modifier tensor also a scalar", "score_mod",
       [&](AttentionArgs& a, Owned&) { a.set_score_mod("s + t[h] + t"); }},
      {"varlen offsets on rank-4 views", "q",
       [](AttentionArgs& a, Owned&) {
         a.seq_offsets_q = {0, 16}, a.seq_offsets_kv = {0, 24};
       }},
      {"huge stride on a size-1 dimension is fine, on a longer one refused", "o",
       [huge](AttentionArgs& a, Owned&) { a.o.strides[0] = huge, a.o.strides[2] = huge; }},
      {"huge q stride", "q", [huge](AttentionArgs& a, Owned&) { a.q.strides[1] = huge; }},
  };
  for (const BadAttentionCase& bad : cases) {
    Case c;
    c.heads = 2, c.kv_heads = 2, c.seq_q = 16, c.seq_kv = 24;
    auto t = make(c);
    AttentionArgs args = t->args;
    try {
      bad.breaks(args, *t);
    } catch (const Error& e) {  // the break itself refused (parse-time checks): that names the argument too
      EXPECT_NE(std::string(e.what()).find(bad.argument), std::string::npos) << bad.what << ": " << e.what();
      continue;
    }
    t->o.set(123.0f);
    try {
      runtime().attention(args);
      ADD_FAILURE() << bad.what << ": accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), bad.argument) << bad.what << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << bad.what << ": wrong exception: " << e.what();
    }
    bool untouched = true;
    t->o.each([&](float x) { untouched &= x == 123.0f; });
    EXPECT_TRUE(untouched) << bad.what << ": a refused call wrote to O";
  }
}

}  // namespace
}  // namespace tessera
