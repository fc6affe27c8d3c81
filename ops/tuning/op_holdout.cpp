#include "tessera/op_holdout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "generator/attention/attention_json.hpp"
#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "generator/cost/attention_cost.hpp"
#include "generator/cost/sparse_cost.hpp"
#include "generator/sparse/sparse_json.hpp"
#include "ops/tuning/regret_summary.hpp"
#include "tessera/sparse.hpp"

namespace tessera {

namespace {

void validate(const OpHoldoutOptions& o) {
  if (o.op != "spmm" && o.op != "sddmm" && o.op != "attention")
    throw InvalidArgument("--op", "'" + o.op + "': expected spmm, sddmm or attention");
  if (o.problems < 1) throw InvalidArgument("--shapes", "must be at least 1");
  if (!(o.max_macs >= 1e4)) throw InvalidArgument("--max-macs", "must be at least 10^4 for these operations");
  if (o.retest_top < 1) throw InvalidArgument("--retest-top", "must be at least 1");
}

template <class Result, class Config>
double time_of(const Result& r, const Config& config) {
  for (const auto& m : r.measured)
    if (m.config == config) return m.median_ns;
  return NAN;
}

template <class Result>
double fastest(const Result& r) {
  double best = INFINITY;
  for (const auto& m : r.measured) best = std::min(best, m.median_ns);
  return best;
}

// What one problem's timings say: the runtime's pick, the analytic model's, the best and the noise floor.
struct Judged {
  double runtime = 0, retest = 0, analytic = 0, floor = 0, best_ns = 0;
  std::size_t variants = 0;
  nlohmann::json pick, best, analytic_pick;
};

// The whole space timed once (`time(configs, true)`: recorded), with the pick where it is not a variant of the space;
// then the leaders and the pick again (`time(configs, false)`).
template <class Config, class Time, class Cycles>
Judged judge(std::vector<Config> space, const Config& pick, int retest_top, Time time, Cycles cycles) {
  if (std::find(space.begin(), space.end(), pick) == space.end()) space.push_back(pick);
  const auto first = time(space, true);
  std::vector<std::pair<double, Config>> ranked;
  for (const auto& m : first.measured) ranked.emplace_back(m.median_ns, m.config);
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Config> leaders;
  for (std::size_t j = 0; j < ranked.size() && static_cast<int>(j) < retest_top; ++j)
    leaders.push_back(ranked[j].second);
  if (std::find(leaders.begin(), leaders.end(), pick) == leaders.end()) leaders.push_back(pick);
  const auto second = time(leaders, false);
  if (ranked.empty() || std::isnan(time_of(first, pick)) || std::isnan(time_of(second, pick)))
    throw Error("holdout: the runtime's pick was not measured");
  Config by_analytic = space[0];
  double least = INFINITY;
  for (const Config& c : space)
    if (const double cy = cycles(c); cy < least) least = cy, by_analytic = c;
  const auto regret = [](const auto& r, const Config& c) { return time_of(r, c) / fastest(r) - 1.0; };
  Judged j;
  j.runtime = regret(first, pick);
  j.retest = regret(second, pick);
  j.analytic = regret(first, by_analytic);
  j.floor = regret(second, ranked[0].second);
  j.best_ns = ranked[0].first;
  j.variants = first.measured.size();
  j.pick = to_json(pick);
  j.best = to_json(ranked[0].second);
  j.analytic_pick = to_json(by_analytic);
  return j;
}

}  // namespace

std::vector<HoldoutProblem> draw_op_holdout(const OpHoldoutOptions& o) {
  validate(o);
  std::set<std::string> taken(o.excluded.begin(), o.excluded.end());
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto log_uniform = [&](double lo, double hi) {
    return std::exp(std::log(lo) + unit(rng) * (std::log(hi) - std::log(lo)));
  };
  const auto side = [&](double lo, double hi) {
    return static_cast<std::int64_t>(std::floor(log_uniform(lo, hi + 1)));
  };
  const auto pick = [&](std::initializer_list<std::int64_t> values) {
    return *(values.begin() + static_cast<std::ptrdiff_t>(unit(rng) * static_cast<double>(values.size())));
  };
  std::vector<HoldoutProblem> out;
  for (int attempts = 0; static_cast<int>(out.size()) < o.problems; ++attempts) {
    if (attempts > 1000 * o.problems) throw InvalidArgument("--max-macs", "too few problems fit these bounds");
    HoldoutProblem p;
    double macs = 0;
    if (o.op == "attention") {
      // Prefill (as long as the keys, or a chunk against a longer cache) and decoding (1-8 queries against a KV
      // cache); multi-head, grouped (2, 4 or 8 heads a KV head) and multi-query; the head dims models use.
      const bool decode = unit(rng) < 0.4;
      p.kind = decode ? "decode" : "prefill";
      const std::int64_t batch = decode ? side(1, 4) : side(1, 2);
      const std::int64_t group = pick({1, 1, 2, 4, 8});
      const std::int64_t kv_heads = side(1, 16), heads = kv_heads * (unit(rng) < 0.1 ? side(8, 32) : group);
      const std::int64_t d = pick({32, 64, 64, 80, 96, 128, 128});
      std::int64_t seq_q = 0, seq_kv = 0;
      if (decode) {
        seq_q = side(1, 8), seq_kv = side(512, 16384);
      } else {
        seq_q = side(32, 4096);
        seq_kv = unit(rng) < 0.75 ? seq_q : side(static_cast<double>(seq_q), 8192);
      }
      const bool causal = (!decode || seq_q > 1) && unit(rng) < 0.5;
      macs = 2.0 * static_cast<double>(batch * heads * seq_q * seq_kv * d) * (causal ? 0.5 : 1.0);
      p.text = fmt::format("{}x{}/{}x{}:{} d{}{}", batch, heads, kv_heads, seq_q, seq_kv, d, causal ? " causal" : "");
    } else {
      const double draw = unit(rng);
      std::int64_t m = 0, k = 0;
      double density = 0;
      std::string tail;
      // Pruned weights (uniform and block-pruned), graphs (power-law) and bands, as the suites hold them, at sizes
      // and densities no suite case takes.
      if (draw < 0.4) {
        p.kind = "uniform", m = side(256, 16384), k = side(256, 16384), density = log_uniform(0.001, 0.3);
      } else if (draw < 0.6) {
        p.kind = "powerlaw", m = k = side(8192, 524288);
        density = log_uniform(4, 32) / static_cast<double>(k);
      } else if (draw < 0.75) {
        p.kind = "banded", m = k = side(4096, 262144);
        density = log_uniform(3, 64) / static_cast<double>(k);
      } else {
        const int block = 4 << static_cast<int>(unit(rng) * 3);  // 4, 8 or 16
        p.kind = "blocks", m = side(512, 8192), k = side(512, 8192), density = log_uniform(0.02, 0.3);
        tail = fmt::format(",{}", block);
      }
      p.dense = o.op == "spmm" ? side(8, 1024) : side(16, 512);
      const double entries = static_cast<double>(m) * static_cast<double>(k) * density;
      if (entries < 256) continue;
      macs = entries * static_cast<double>(p.dense);
      p.text = fmt::format("{}:{},{},{:.4g},{}{}", p.kind, m, k, density, attempts + 1, tail);
    }
    if (macs > o.max_macs) continue;
    if (!taken.insert(p.key()).second) continue;
    out.push_back(p);
  }
  return out;
}

namespace {

// "BxH/KVxSQ:SKV dD[ causal]" as an f32 BHSD problem.
AttentionProblem attention_problem(const std::string& text, int threads) {
  AttentionProblem p;
  int d = 0;
  char causal[8] = {};
  long long b = 0, h = 0, kv = 0, sq = 0, skv = 0;
  if (std::sscanf(text.c_str(), "%lldx%lld/%lldx%lld:%lld d%d %7s", &b, &h, &kv, &sq, &skv, &d, causal) < 6)
    throw Error("holdout: malformed attention problem '" + text + "'");
  p.batch = b, p.heads = h, p.kv_heads = kv, p.seq_q = sq, p.seq_kv = skv;
  p.signature.head_dim_qk = p.signature.head_dim_v = d;
  p.signature.causal = std::string(causal) == "causal";
  p.threads = threads;
  return p;
}

}  // namespace

nlohmann::json op_holdout(Runtime& runtime, const OpHoldoutOptions& options, MeasurementStore* records,
                          const std::function<void(int, int, const std::string&)>& progress) {
  const std::vector<HoldoutProblem> drawn = draw_op_holdout(options);
  const CpuTarget& target = runtime.target();
  const int threads = runtime.threads();
  std::vector<double> runtime_regret, retest_regret, analytic_regret, noise;
  std::map<std::string, std::vector<double>> by_kind;
  nlohmann::json cases = nlohmann::json::array();
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    const HoldoutProblem& d = drawn[i];
    const std::string family = "holdout-" + d.kind;
    Judged j;
    nlohmann::json c = {{"kind", d.kind}};
    double flops = 0;
    std::string described = d.text;
    if (options.op == "attention") {
      const AttentionProblem problem = attention_problem(d.text, threads);
      j = judge(
          cpu_attention_variants(problem, target), runtime.choose_config(problem), options.retest_top,
          [&](const std::vector<CpuAttentionConfig>& configs, bool first) {
            return measure_attention(runtime, problem, configs, options.timing, first ? records : nullptr, family);
          },
          [&](const CpuAttentionConfig& x) { return attention_cycles(problem, x, target); });
      c["problem"] = d.text;
      flops = problem.flops();
    } else {
      const SparseMatrixData csr = SparseMatrixData::csr(generate_pattern(d.text));
      std::string format = "csr";
      std::int64_t stored = csr.view().entries;
      if (options.op == "spmm") {
        // The form Runtime::spmm runs the pattern in: CSR, or BSR where its entries cluster.
        const SparsePlan plan = SparsePlan::inspect(csr.view(), threads);
        const auto blocked = plan.blocked(csr.view(), threads, d.dense, cpu_spmm_max_block_rows(target));
        const SparseMatrix a = blocked ? blocked->data.view() : csr.view();
        if (blocked) format = fmt::format("bsr:{}x{}", a.block_rows, a.block_cols);
        stored = a.entries;
        std::vector<float> b(static_cast<std::size_t>(std::max<std::int64_t>(1, a.cols * d.dense)));
        std::vector<float> out(static_cast<std::size_t>(std::max<std::int64_t>(1, a.rows * d.dense)));
        SpmmArgs args;
        args.a = a;
        args.b = Tensor::matrix(b.data(), a.cols, d.dense);
        args.d = Tensor::matrix(out.data(), a.rows, d.dense);
        args.threads = threads;
        SpmmProblem problem = runtime.describe(args);
        problem.threads = threads;
        j = judge(
            cpu_spmm_variants(problem, target), runtime.choose_config(problem), options.retest_top,
            [&](const std::vector<CpuSpmmConfig>& configs, bool first) {
              return measure_spmm(runtime, problem, a, configs, options.timing, first ? records : nullptr, family);
            },
            [&](const CpuSpmmConfig& x) { return spmm_cycles(problem, x, target); });
      } else {
        const SparseMatrix pattern = csr.view();
        std::vector<float> a(static_cast<std::size_t>(std::max<std::int64_t>(1, pattern.rows * d.dense)));
        std::vector<float> b(static_cast<std::size_t>(std::max<std::int64_t>(1, pattern.cols * d.dense)));
        std::vector<float> out(static_cast<std::size_t>(std::max<std::int64_t>(1, pattern.entries)));
        SddmmArgs args;
        args.pattern = pattern;
        args.a = Tensor::matrix(a.data(), pattern.rows, d.dense);
        args.b = Tensor::matrix(b.data(), pattern.cols, d.dense);
        args.out = Tensor::vector(out.data(), pattern.entries);
        args.threads = threads;
        SddmmProblem problem = runtime.describe(args);
        problem.threads = threads;
        j = judge(
            cpu_sddmm_variants(problem, target), runtime.choose_config(problem), options.retest_top,
            [&](const std::vector<CpuSddmmConfig>& configs, bool first) {
              return measure_sddmm(runtime, problem, pattern, configs, options.timing, first ? records : nullptr,
                                   family);
            },
            [&](const CpuSddmmConfig& x) { return sddmm_cycles(problem, x, target); });
      }
      c["pattern"] = d.text;
      c["dense"] = d.dense;
      c["format"] = format;
      c["nnz"] = csr.view().entries;
      c["stored_entries"] = stored;
      flops = 2.0 * static_cast<double>(csr.view().entries) * static_cast<double>(d.dense);
      described = fmt::format("{} {} ({})", d.text, d.dense, format);
    }
    runtime_regret.push_back(j.runtime);
    retest_regret.push_back(j.retest);
    analytic_regret.push_back(j.analytic);
    noise.push_back(j.floor);
    by_kind[d.kind].push_back(j.runtime);
    c["variants"] = j.variants;
    c["pick"] = j.pick;
    c["best"] = j.best;
    c["analytic_pick"] = j.analytic_pick;
    c["best_gflops"] = flops / j.best_ns;
    c["regret"] = j.runtime;
    c["regret_retest"] = j.retest;
    c["analytic_regret"] = j.analytic;
    c["noise_floor"] = j.floor;
    cases.push_back(c);
    if (progress)
      progress(static_cast<int>(i) + 1, static_cast<int>(drawn.size()),
               fmt::format("{} {}, {} variants: best {:.1f} GFLOP/s; runtime {:+.1f}% (retimed {:+.1f}%), analytic "
                           "{:+.1f}%, noise {:+.1f}%",
                           options.op, described, j.variants, flops / j.best_ns, 100 * j.runtime, 100 * j.retest,
                           100 * j.analytic, 100 * j.floor));
  }
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [kind, r] : by_kind) kinds[kind] = {{"problems", r.size()}, {"runtime", regret_summary(r)}};
  return {{"op", options.op},
          {"problems", drawn.size()},
          {"seed", options.seed},
          {"threads", threads},
          {"target", target.str()},
          {"runtime", regret_summary(runtime_regret)},
          {"runtime_retest", regret_summary(retest_regret)},
          {"analytic", regret_summary(analytic_regret)},
          {"noise_floor", regret_summary(noise)},
          {"by_kind", kinds},
          {"cases", cases}};
}

}  // namespace tessera
