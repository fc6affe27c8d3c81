#include "tessera/model_eval.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "generator/gemm/gemm_features.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/gemm/gemm_variants.hpp"
#include "tessera/cost_models.hpp"
#include "tessera/tuning_records.hpp"

namespace tessera {

namespace {
// Kendall's τ-b between predicted scores (lower = faster) and measured times.
double kendall_tau(const std::vector<double>& predicted, const std::vector<double>& measured) {
  double concordant = 0, discordant = 0, ties_p = 0, ties_m = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i)
    for (std::size_t j = i + 1; j < predicted.size(); ++j) {
      const double a = predicted[i] - predicted[j], b = measured[i] - measured[j];
      if (a == 0 && b == 0) continue;
      if (a == 0) {
        ++ties_p;
      } else if (b == 0) {
        ++ties_m;
      } else if ((a > 0) == (b > 0)) {
        ++concordant;
      } else {
        ++discordant;
      }
    }
  const double n0 = concordant + discordant;
  const double denominator = std::sqrt((n0 + ties_p) * (n0 + ties_m));
  return denominator > 0 ? (concordant - discordant) / denominator : 0.0;
}

struct Outcome {
  std::vector<double> regret, top5, tau;
  std::vector<std::string> family;               // of each problem, for the regret by family
  std::vector<bool> pick_timed_once;             // per problem: the top-1 pick's time is a single sample
  std::vector<std::vector<double>> best_within;  // per problem: best_ns / best of the top k, k = 1..
};

void score_problem(Outcome& o, const RecordedProblem& p, const std::vector<double>& scores, bool with_tau) {
  const double best = *std::min_element(p.ns.begin(), p.ns.end());
  const std::vector<std::size_t> order = rank_by_score(scores);
  o.regret.push_back(p.ns[order[0]] / best - 1.0);
  o.pick_timed_once.push_back(order[0] < p.samples.size() && p.samples[order[0]] < 2);
  o.family.push_back(p.family);
  std::vector<double> within;
  double found = INFINITY;
  for (std::size_t k = 0; k < order.size(); ++k) {
    found = std::min(found, p.ns[order[k]]);
    within.push_back(best / found);
  }
  o.top5.push_back(within[std::min<std::size_t>(4, within.size() - 1)]);
  o.best_within.push_back(within);
  if (with_tau) o.tau.push_back(kendall_tau(scores, p.ns));
}

nlohmann::json summary(const Outcome& o, bool with_tau) {
  const auto to_reach = [&](double level) -> nlohmann::json {
    std::size_t longest = 0;
    for (const auto& w : o.best_within) longest = std::max(longest, w.size());
    for (std::size_t k = 0; k < longest; ++k) {
      double total = 0;
      for (const auto& w : o.best_within) total += w[std::min(k, w.size() - 1)];
      if (total / static_cast<double>(o.best_within.size()) >= level) return k + 1;
    }
    return nullptr;  // never, on average, within the measured candidates
  };
  std::map<std::string, std::vector<double>> by_family;
  for (std::size_t i = 0; i < o.regret.size(); ++i) by_family[o.family[i]].push_back(o.regret[i]);
  nlohmann::json family_regret = nlohmann::json::object();
  for (const auto& [family, r] : by_family) family_regret[family] = mean(r);
  // A variant the tuner timed once (its first time more than 4× the best's) has no second sample to say whether
  // that time was noise: the mean over picks timed at least twice shows what such single samples weigh.
  std::vector<double> timed_twice;
  for (std::size_t i = 0; i < o.regret.size(); ++i)
    if (!o.pick_timed_once[i]) timed_twice.push_back(o.regret[i]);
  return {{"top1_regret_mean", mean(o.regret)},
          {"top1_picks_timed_once", o.regret.size() - timed_twice.size()},
          {"top1_regret_mean_picks_timed_twice", mean(timed_twice)},
          {"top1_regret_p90", quantile(o.regret, 0.9)},
          {"top1_regret_max", quantile(o.regret, 1.0)},
          {"top5_score", mean(o.top5)},
          {"kendall_tau", with_tau ? nlohmann::json(mean(o.tau)) : nlohmann::json()},
          // A fixed default is one choice, not an order: it has no "measure the next best" to count.
          {"measurements_to_98", with_tau ? to_reach(0.98) : nlohmann::json()},
          {"measurements_to_99", with_tau ? to_reach(0.99) : nlohmann::json()},
          {"top1_regret_by_family", family_regret}};
}
// Descriptions of one machine kind written by different tessera versions (before the L3 and the FMA rate were
// described) name the same caches and FMA rate once hardware_target reads them: one description for all of them, so
// that their records pool. A description without caches stays as it is.
std::string canonical_hardware(const std::string& hardware) {
  CpuTarget unknown;
  unknown.isa = CpuIsa::Avx512;
  unknown.l1d_bytes = unknown.l2_bytes = unknown.l3_bytes = 0;
  unknown.vector_fmas_per_cycle = 0;
  const CpuTarget t = TuningRecords::hardware_target(unknown, hardware);
  if (t.l1d_bytes == 0) return hardware;
  return fmt::format("{}; L1d {} KiB, L2 {} KiB, L3 {} KiB, AVX-512 FMAs {}/cycle",
                     hardware.substr(0, hardware.find(';')), t.l1d_bytes >> 10, t.l2_bytes >> 10, t.l3_bytes >> 10,
                     t.vector_fmas_per_cycle);
}
}  // namespace

std::vector<RecordedProblem> recorded_problems(const std::vector<TuningRecord>& records, const std::string& target,
                                               RecordedHosts hosts) {
  // The most common hardware among this target's records (with every host: all of them); every thread count, each
  // a problem of its own.
  std::map<std::string, int> settings;
  std::map<std::string, std::string> canonical;  // each description's canonical form
  for (const auto& r : records) {
    auto [at, added] = canonical.try_emplace(r.hardware);
    if (added) at->second = canonical_hardware(r.hardware);
    if (r.target == target) ++settings[hosts == RecordedHosts::every ? std::string() : at->second];
  }
  if (settings.empty()) return {};
  const auto setting =
      std::max_element(settings.begin(), settings.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  // A problem timed with B cold and with B in the caches is two problems (the order of its variants differs); so is
  // one timed on two machines.
  using Key = std::tuple<std::string, std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool, int>;
  std::map<Key, RecordedProblem> grouped;
  std::map<Key, std::vector<double>> spreads;
  for (const auto& r : records) {
    const std::string& hardware = canonical[r.hardware];
    if (r.op != "gemm" || r.target != target || (hosts == RecordedHosts::most_common && hardware != setting)) continue;
    const GemmExtents size = gemm_extents(r);
    const Key key{hardware, r.signature, size.m, size.n, size.k, size.batch, r.b_cold, r.threads};
    RecordedProblem& p = grouped[key];
    // A row whose JSON does not parse (a damaged or foreign database) is named, not a crash.
    const auto parsed = [&](const std::string& text, const char* column) {
      try {
        return nlohmann::json::parse(text);
      } catch (const nlohmann::json::exception& e) {
        throw InvalidArgument(
            "records", fmt::format("the measurement of spec {} ({}x{}x{}x{}) has a malformed {}: {}", r.spec_hash,
                                   size.m, size.n, size.k, size.batch, column, e.what()));
      }
    };
    try {
      if (p.configs.empty()) {
        p.problem.m = size.m, p.problem.n = size.n, p.problem.k = size.k, p.problem.batch = size.batch;
        p.problem.signature = from_json<GemmSignature>(parsed(r.signature, "signature"));
        p.family = r.family;
        p.hardware = hardware;
        p.problem.b_cold = r.b_cold;    // timed with B evicted from the caches before each call
        p.problem.threads = r.threads;  // training_set ranks it as problem_on_threads describes
      }
      p.configs.push_back(from_json<CpuGemmConfig>(parsed(r.config, "config")));
    } catch (const nlohmann::json::exception& e) {
      throw InvalidArgument(
          "records", fmt::format("the measurement of spec {} does not describe a GEMM: {}", r.spec_hash, e.what()));
    }
    p.ns.push_back(r.median_ns);
    p.samples.push_back(r.samples);
    // A variant timed once (dropped by the tuner as far slower than the fastest) has no spread to report.
    if (r.samples >= 2) spreads[key].push_back(r.spread);
  }
  std::vector<RecordedProblem> out;
  for (auto& [key, p] : grouped)
    if (p.configs.size() >= 2) {
      p.spread = quantile(spreads[key], 0.5);  // NaN when no variant was timed twice
      out.push_back(std::move(p));
    }
  return out;
}

TrainingSet training_set(const std::vector<RecordedProblem>& problems, const CpuTarget& target) {
  TrainingSet set;
  for (const auto& p : problems) {
    const CpuTarget host = TuningRecords::hardware_target(target, p.hardware);
    const GemmProblem ranked = problem_on_threads(p.problem, p.problem.threads);
    const std::vector<float> rows = cpu_feature_rows(ranked, p.configs, host);
    set.features.insert(set.features.end(), rows.begin(), rows.end());
    // Several threads' times as measured, the split among the features; score_on_threads still adds the grid
    // planner's estimate of it (see there).
    for (double ns : p.ns) set.log_time.push_back(static_cast<float>(std::log2(ns)));
    set.group_sizes.push_back(static_cast<unsigned>(p.configs.size()));
    const double fastest = *std::min_element(p.ns.begin(), p.ns.end());
    std::vector<double> slowdown;
    for (double ns : p.ns) slowdown.push_back(std::log2(ns / fastest));
    // Measured ties go to the tile issuing fewest loads where that was measured to pay: AVX-512 cores with two
    // full-width FMA units.
    const std::size_t best = host.isa == CpuIsa::Avx512 && host.vector_fmas_per_cycle >= 2
                                 ? fewest_loads_among_ties(p.configs, slowdown, host.vector_lanes())
                                 : static_cast<std::size_t>(std::min_element(p.ns.begin(), p.ns.end()) - p.ns.begin());
    set.measured_best.emplace_back(measured_problem_key(ranked), p.configs[best]);
  }
  return set;
}

nlohmann::json retest_regret(const std::vector<RecordedProblem>& first, const std::vector<RecordedProblem>& second) {
  const auto key = [](const RecordedProblem& p) {
    return std::make_tuple(to_json(p.problem.signature).dump(), p.problem.m, p.problem.n, p.problem.k, p.problem.batch,
                           p.problem.b_cold);
  };
  std::map<decltype(key(first[0])), const RecordedProblem*> by_key;
  for (const auto& p : second) by_key[key(p)] = &p;
  std::vector<double> regret;
  std::map<std::string, std::vector<double>> by_family;
  for (const auto& p : first) {
    const auto found = by_key.find(key(p));
    if (found == by_key.end()) continue;
    const RecordedProblem& q = *found->second;
    std::map<std::string, double> second_ns;
    for (std::size_t i = 0; i < q.configs.size(); ++i) second_ns[to_json(q.configs[i]).dump()] = q.ns[i];
    double first_best = INFINITY, chosen = NAN, second_best = INFINITY;
    for (std::size_t i = 0; i < p.configs.size(); ++i) {
      const auto t = second_ns.find(to_json(p.configs[i]).dump());
      if (t == second_ns.end()) continue;
      second_best = std::min(second_best, t->second);
      if (p.ns[i] < first_best) first_best = p.ns[i], chosen = t->second;
    }
    if (std::isnan(chosen)) continue;
    regret.push_back(chosen / second_best - 1.0);
    by_family[p.family].push_back(regret.back());
  }
  nlohmann::json families = nlohmann::json::object();
  for (const auto& [family, r] : by_family) families[family] = mean(r);
  return {{"problems", regret.size()},
          {"regret_mean", mean(regret)},
          {"regret_p90", quantile(regret, 0.9)},
          {"regret_max", quantile(regret, 1.0)},
          {"by_family", families}};
}

nlohmann::json twin_variant_spread(const std::vector<RecordedProblem>& problems) {
  std::vector<double> spreads;
  for (const auto& p : problems) {
    // The config as its kernel runs this problem: blocks clipped to the (tile-rounded) problem.
    std::map<std::string, std::pair<double, double>> groups;  // work key → (fastest, slowest)
    std::map<std::string, int> members;
    for (std::size_t i = 0; i < p.configs.size(); ++i) {
      CpuGemmConfig c = p.configs[i];
      const auto round_up = [](std::int64_t x, int to) { return static_cast<int>((x + to - 1) / to * to); };
      c.kc = std::min<std::int64_t>(c.kc, std::max<std::int64_t>(round_up(p.problem.k, 2), 2));
      c.mc = std::min(c.mc, round_up(p.problem.m, c.mr));
      c.nc = std::min(c.nc, round_up(p.problem.n, c.nr));
      const std::string key = to_json(c).dump();
      auto [it, fresh] = groups.try_emplace(key, p.ns[i], p.ns[i]);
      it->second.first = std::min(it->second.first, p.ns[i]);
      it->second.second = std::max(it->second.second, p.ns[i]);
      ++members[key];
    }
    for (const auto& [key, times] : groups)
      if (members[key] >= 2) spreads.push_back(times.second / times.first - 1.0);
  }
  return {{"groups", spreads.size()},
          {"spread_median", quantile(spreads, 0.5)},
          {"spread_p90", quantile(spreads, 0.9)},
          {"spread_max", quantile(spreads, 1.0)}};
}

namespace {
// The problem's recorded variants that today's space still holds: the runtime ranks no others. (Records may hold
// variants measured before a pruning rule; models still learn from them.)
RecordedProblem within_space(const RecordedProblem& p) {
  RecordedProblem out = p;
  out.configs.clear(), out.ns.clear(), out.samples.clear();
  for (std::size_t i = 0; i < p.configs.size(); ++i) {
    if (outside_space(p.problem, p.configs[i])) continue;
    out.configs.push_back(p.configs[i]);
    out.ns.push_back(p.ns[i]);
    if (i < p.samples.size()) out.samples.push_back(p.samples[i]);
  }
  return out;
}
}  // namespace

nlohmann::json evaluate_cost_models(const std::vector<RecordedProblem>& problems, const std::string& split,
                                    const CpuTarget& target, const TrainingOptions& options,
                                    const std::vector<RecordedProblem>& retest,
                                    const std::set<std::string>& scored_families) {
  const auto scored = [&](const RecordedProblem& p) {
    return scored_families.empty() || scored_families.count(p.family) > 0;
  };
  if (std::none_of(problems.begin(), problems.end(), scored))
    throw InvalidArgument("--families", "none of the records belongs to these families");
  if (split != "random" && split != "family" && split != "host")
    throw InvalidArgument("--split", "must be random, family or host");
  if (problems.size() < 5) throw InvalidArgument("--records", "fewer than 5 problems with measurements");
  // Folds of held-out problems: 5 random folds, or one per family.
  std::vector<int> fold(problems.size());
  std::vector<std::string> fold_names;
  if (split == "random") {
    std::vector<std::size_t> order(problems.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(options.seed));
    for (std::size_t i = 0; i < order.size(); ++i) fold[order[i]] = static_cast<int>(i % 5);
    fold_names = {"0", "1", "2", "3", "4"};
  } else {
    // One fold per family, or per machine (leave one host out: trained on the others, judged on its records).
    const auto group = [&](const RecordedProblem& p) -> const std::string& {
      return split == "family" ? p.family : p.hardware;
    };
    std::set<std::string> groups;
    for (const auto& p : problems) groups.insert(group(p));
    fold_names.assign(groups.begin(), groups.end());
    for (std::size_t i = 0; i < problems.size(); ++i)
      fold[i] =
          static_cast<int>(std::find(fold_names.begin(), fold_names.end(), group(problems[i])) - fold_names.begin());
    if (fold_names.size() < 2)
      throw InvalidArgument("--split", split == "family"
                                           ? "family needs records from at least two families"
                                           : "host needs records of at least two machines (--every-host)");
  }
  Outcome learned, analytic, fixed_default, runtime;
  std::size_t fallbacks = 0;
  std::vector<std::pair<double, nlohmann::json>> worst;  // the learned model's largest regrets, for diagnosis
  nlohmann::json per_fold = nlohmann::json::array();
  const AnalyticCpuModel analytic_model;
  std::vector<double> rank_ms;
  for (int f = 0; f < static_cast<int>(fold_names.size()); ++f) {
    std::vector<RecordedProblem> train, test;
    for (std::size_t i = 0; i < problems.size(); ++i) {
      if (fold[i] != f)
        train.push_back(problems[i]);
      else if (scored(problems[i]))
        test.push_back(problems[i]);
    }
    if (test.empty() || train.empty()) continue;
    const auto model = LearnedCpuModel::train(training_set(train, target), target, options);
    Outcome fold_learned, fold_runtime, fold_default;
    for (const auto& recorded : test) {
      const RecordedProblem p = within_space(recorded);
      const CpuTarget host = TuningRecords::hardware_target(target, p.hardware);  // the recording machine's
      // As the runtime ranks it on the threads it was timed on.
      const int threads = std::max(1, p.problem.threads);
      const auto rank = [&](const std::vector<CpuGemmConfig>& configs) {
        return score_on_threads(*model, p.problem, thread_share(p.problem, threads), configs, host, threads);
      };
      const auto scores = rank(p.configs);
      score_problem(learned, p, scores, true);
      {
        const std::size_t chosen = rank_by_score(scores)[0];
        const std::size_t best = static_cast<std::size_t>(std::min_element(p.ns.begin(), p.ns.end()) - p.ns.begin());
        worst.push_back({learned.regret.back(),
                         {{"problem", fmt::format("{}x{}x{}x{} ({})", p.problem.m, p.problem.n, p.problem.k,
                                                  p.problem.batch, p.family)},
                          {"regret", learned.regret.back()},
                          {"chosen", to_json(p.configs[chosen])},
                          {"best", to_json(p.configs[best])}}});
      }
      score_problem(fold_learned, p, scores, true);
      score_problem(analytic, p, analytic_model.score(p.problem, p.configs, host), true);
      // The fixed default: default_for's config when it was measured (it is part of every space).
      const CpuGemmConfig d = CpuGemmConfig::default_for(p.problem, host);
      std::vector<double> chosen(p.configs.size(), 1.0);
      bool found = false;
      for (std::size_t i = 0; i < p.configs.size(); ++i)
        if (p.configs[i] == d) chosen[i] = 0.0, found = true;
      if (found) {
        score_problem(fixed_default, p, chosen, false);
        score_problem(fold_default, p, chosen, false);
      }
      // What the runtime compiles: the learned top-1 where the model's training covers the problem, else the default.
      if (model->covers(p.problem, host)) {
        score_problem(runtime, p, scores, false);
        score_problem(fold_runtime, p, scores, false);
      } else if (found) {
        score_problem(runtime, p, chosen, false);
        score_problem(fold_runtime, p, chosen, false);
        ++fallbacks;
      }
      // The cost of ranking the problem's whole variant space.
      const auto space = cpu_variants(p.problem, host);
      const auto start = std::chrono::steady_clock::now();
      rank_by_score(rank(space));
      rank_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    per_fold.push_back({{"held_out", fold_names[static_cast<std::size_t>(f)]},
                        {"problems", test.size()},
                        {"learned_top1_regret_mean", mean(fold_learned.regret)},
                        {"runtime", summary(fold_runtime, false)},
                        {"default", summary(fold_default, false)}});
  }
  std::vector<double> spreads, space_sizes;
  std::size_t scored_problems = 0;
  for (const auto& p : problems) {
    scored_problems += scored(p) ? 1 : 0;
    if (!std::isnan(p.spread)) spreads.push_back(p.spread);
    space_sizes.push_back(static_cast<double>(p.configs.size()));
  }
  nlohmann::json report{{"split", split},
                        {"problems", problems.size()},
                        {"scored_problems", scored_problems},
                        {"target", target.str()},
                        {"learned", summary(learned, true)},
                        {"analytic", summary(analytic, true)},
                        {"default", summary(fixed_default, false)},
                        {"runtime", summary(runtime, false)},
                        {"runtime_fallbacks", fallbacks},
                        {"noise_floor", quantile(spreads, 0.5)},
                        {"noise_floor_p90", quantile(spreads, 0.9)},
                        {"variants_per_problem", mean(space_sizes)},
                        {"ranking_ms_median", quantile(rank_ms, 0.5)},
                        {"ranking_ms_max", quantile(rank_ms, 1.0)},
                        {"folds", per_fold},
                        {"learned_worst", [&] {
                           std::sort(worst.begin(), worst.end(), [](auto& a, auto& b) { return a.first > b.first; });
                           nlohmann::json w = nlohmann::json::array();
                           for (std::size_t i = 0; i < std::min<std::size_t>(8, worst.size()); ++i)
                             w.push_back(worst[i].second);
                           return w;
                         }()}};
  if (!retest.empty()) report["retest"] = retest_regret(problems, retest);
  report["twin_variants"] = twin_variant_spread(problems);
  return report;
}

}  // namespace tessera
