#include "tessera/sparse_holdout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "generator/cost/sparse_cost.hpp"
#include "generator/sparse/sparse_json.hpp"
#include "tessera/sparse.hpp"

namespace tessera {

namespace {

nlohmann::json regret_summary(const std::vector<double>& regret) {
  return {{"top1_regret_mean", mean(regret)},
          {"top1_regret_p90", quantile(regret, 0.9)},
          {"top1_regret_max", quantile(regret, 1.0)}};
}

void validate(const SparseHoldoutOptions& o) {
  if (o.op != "spmm" && o.op != "sddmm") throw InvalidArgument("--op", "'" + o.op + "': expected spmm or sddmm");
  if (o.problems < 1) throw InvalidArgument("--shapes", "must be at least 1");
  if (!(o.max_macs >= 1e4)) throw InvalidArgument("--max-macs", "must be at least 10^4 for sparse problems");
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

// The whole space timed once (`time(configs, records)`), its leaders and the pick again.
template <class Config, class Time, class Cycles>
Judged judge(const std::vector<Config>& space, const Config& pick, int retest_top, Time time, Cycles cycles) {
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
    throw Error("sparse holdout: the runtime's pick was not measured");
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

std::vector<SparseHoldoutProblem> draw_sparse_holdout(const SparseHoldoutOptions& o) {
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
  std::vector<SparseHoldoutProblem> out;
  for (int attempts = 0; static_cast<int>(out.size()) < o.problems; ++attempts) {
    if (attempts > 1000 * o.problems) throw InvalidArgument("--max-macs", "too few problems fit these bounds");
    SparseHoldoutProblem p;
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
    const double macs = static_cast<double>(m) * static_cast<double>(k) * density * static_cast<double>(p.dense);
    if (macs > o.max_macs || static_cast<double>(m) * static_cast<double>(k) * density < 256) continue;
    p.pattern = fmt::format("{}:{},{},{:.4g},{}{}", p.kind, m, k, density, attempts + 1, tail);
    if (!taken.insert(fmt::format("{} {}", p.pattern, p.dense)).second) continue;
    out.push_back(p);
  }
  return out;
}

nlohmann::json sparse_holdout(Runtime& runtime, const SparseHoldoutOptions& options, MeasurementStore* records,
                              const std::function<void(int, int, const std::string&)>& progress) {
  const std::vector<SparseHoldoutProblem> drawn = draw_sparse_holdout(options);
  const CpuTarget& target = runtime.target();
  const int threads = runtime.threads();
  std::vector<double> runtime_regret, retest_regret, analytic_regret, noise;
  std::map<std::string, std::vector<double>> by_kind;
  nlohmann::json cases = nlohmann::json::array();
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    const SparseHoldoutProblem& d = drawn[i];
    const SparseMatrixData csr = SparseMatrixData::csr(generate_pattern(d.pattern));
    const std::string family = "holdout-" + d.kind;
    Judged j;
    std::string format = "csr";
    std::int64_t stored = 0;
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
          [&](const CpuSpmmConfig& c) { return spmm_cycles(problem, c, target); });
    } else {
      const SparseMatrix pattern = csr.view();
      stored = pattern.entries;
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
            return measure_sddmm(runtime, problem, pattern, configs, options.timing, first ? records : nullptr, family);
          },
          [&](const CpuSddmmConfig& c) { return sddmm_cycles(problem, c, target); });
    }
    runtime_regret.push_back(j.runtime);
    retest_regret.push_back(j.retest);
    analytic_regret.push_back(j.analytic);
    noise.push_back(j.floor);
    by_kind[d.kind].push_back(j.runtime);
    const double gflops = 2.0 * static_cast<double>(csr.view().entries) * static_cast<double>(d.dense) / j.best_ns;
    cases.push_back({{"pattern", d.pattern},
                     {"dense", d.dense},
                     {"kind", d.kind},
                     {"format", format},
                     {"nnz", csr.view().entries},
                     {"stored_entries", stored},
                     {"variants", j.variants},
                     {"pick", j.pick},
                     {"best", j.best},
                     {"analytic_pick", j.analytic_pick},
                     {"best_gflops", gflops},
                     {"regret", j.runtime},
                     {"regret_retest", j.retest},
                     {"analytic_regret", j.analytic},
                     {"noise_floor", j.floor}});
    if (progress)
      progress(static_cast<int>(i) + 1, static_cast<int>(drawn.size()),
               fmt::format("{} {} {} ({}, {} variants): best {:.1f} GFLOP/s; runtime {:+.1f}% (retimed {:+.1f}%), "
                           "analytic {:+.1f}%, noise {:+.1f}%",
                           options.op, d.pattern, d.dense, format, j.variants, gflops, 100 * j.runtime, 100 * j.retest,
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
