// `tessera model train --records DB... --out FILE.json`, `tessera model eval --records DB... --split
// random|family|host`, `tessera model features --records DB... --out FILE.csv`, `tessera model holdout` and
// `tessera model calibrate`.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>
#include "cli_common.hpp"
#include "commands.hpp"
#include "generator/gemm/cpu_gemm_spec.hpp"
#include "generator/gemm/gemm_features.hpp"
#include "tessera/cost_models.hpp"
#include "tessera/model_eval.hpp"
#include "tessera/model_holdout.hpp"
#include "tessera/op_holdout.hpp"

namespace tessera::cli {

namespace {
// A model written next to its destination and renamed: a failed run leaves no partial model.
// `records`: the files it was trained on, by name, kept in the model ("trained_on") so that calibrating it later
// trains on the same records beside the new host's.
void write_model(const LearnedCpuModel& model, const std::string& out, const std::vector<std::string>& records) {
  const std::string tmp = fmt::format("{}.tmp-{}", out, getpid());
  {
    std::ofstream file(tmp);
    if (records.empty()) {
      file << model.to_json() << "\n";
    } else {
      nlohmann::json document = nlohmann::json::parse(model.to_json());
      std::vector<std::string> names;
      for (const std::string& r : records) names.push_back(std::filesystem::path(r).filename().string());
      document["trained_on"] = names;
      file << document.dump() << "\n";
    }
    if (!file) throw Error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, out);
}

// The measurements of several records files as one: runs of one problem on one machine merged as `tessera tune
// merge` does (each measurement the median over the runs that took it).
std::vector<TuningRecord> read_records(const std::vector<std::string>& paths, const std::string& target,
                                       const char* option) {
  std::vector<std::vector<TuningRecord>> runs;
  for (const std::string& path : paths) {
    if (!std::filesystem::exists(path)) throw InvalidArgument(option, "no such file '" + path + "'");
    runs.push_back(TuningRecords(path, TuningRecords::Access::ReadOnly).all("gemm", target));  // kept as they are
  }
  if (runs.size() == 1) return std::move(runs.front());
  return merge_tuning_runs(runs);
}

struct ModelCommand {
  std::vector<std::string> records;
  std::string retest, out, split = "random", target = "cpu";
  bool every_host = false;  // every machine's records, each problem's features with its machine's caches
  std::vector<std::string> families;
  bool json = false;
  TrainingOptions options;

  std::vector<RecordedProblem> load(const CpuTarget& t, const std::vector<std::string>& paths,
                                    const char* option = "--records") const {
    auto problems =
        recorded_problems(read_records(paths, t.str(), option), t.str(),
                          every_host || split == "host" ? RecordedHosts::every : RecordedHosts::most_common);
    if (problems.empty())
      throw InvalidArgument(option,
                            fmt::format("'{}' holds no measurements for {}", fmt::join(paths, "', '"), t.str()));
    return problems;
  }
  std::vector<RecordedProblem> load(const CpuTarget& t) const { return load(t, records); }
  // The target as the recording machine was: its caches, not this host's, shape features and default configs.
  static CpuTarget recorded_target(const CpuTarget& t, const std::vector<RecordedProblem>& problems) {
    return TuningRecords::hardware_target(t, problems.front().hardware);
  }

  int train() const {
    const auto problems = load(CpuTarget::named(target));
    const CpuTarget t = recorded_target(CpuTarget::named(target), problems);
    const auto model = LearnedCpuModel::train(training_set(problems, t), t, options);
    write_model(*model, out, records);
    std::cout << fmt::format("trained on {} problems ({} measurements) for {} → {}\n", problems.size(),
                             training_set(problems, t).rows(), t.str(), out);
    return kOk;
  }

  // The training set as CSV, one row per measurement: for studying features outside tessera.
  int features() const {
    const auto problems = load(CpuTarget::named(target));
    const CpuTarget t = recorded_target(CpuTarget::named(target), problems);
    const std::string tmp = fmt::format("{}.tmp-{}", out, getpid());
    {
      std::ofstream file(tmp);
      file << "problem,family,m,n,k,batch,config";
      for (const auto& name : cpu_feature_names()) file << "," << name;
      file << ",ns\n";
      const std::size_t columns = cpu_feature_names().size();
      for (std::size_t p = 0; p < problems.size(); ++p) {
        const GemmProblem& q = problems[p].problem;
        const std::vector<float> rows = cpu_feature_rows(q, problems[p].configs, t);
        for (std::size_t i = 0; i < problems[p].configs.size(); ++i) {
          file << fmt::format("{},{},{},{},{},{},{}", p, problems[p].family, q.m, q.n, q.k, q.batch,
                              CpuGemmSpec{q.signature, problems[p].configs[i], t}.name());
          for (std::size_t f = 0; f < columns; ++f) file << "," << rows[i * columns + f];
          file << fmt::format(",{}\n", problems[p].ns[i]);
        }
      }
      if (!file) throw Error("cannot write " + tmp);
    }
    std::filesystem::rename(tmp, out);
    return kOk;
  }

  int eval() const {
    const auto problems = load(CpuTarget::named(target));
    const CpuTarget t = recorded_target(CpuTarget::named(target), problems);
    const nlohmann::json report = evaluate_cost_models(
        problems, split, t, options, retest.empty() ? std::vector<RecordedProblem>{} : load(t, {retest}, "--retest"),
        std::set<std::string>(families.begin(), families.end()));
    if (json) {
      std::cout << report.dump() << "\n";
      return kOk;
    }
    std::cout << fmt::format(
        "{} problems ({} scored), {} split, {:.0f} variants each on average; noise floor (median spread of "
        "a measurement) {:.2f}%\n",
        report["problems"].get<int>(), report["scored_problems"].get<int>(), split,
        report["variants_per_problem"].get<double>(), 100 * report["noise_floor"].get<double>());
    std::cout << "model      regret mean   p90     max     top-5   kendall τ  to 98%  to 99%\n";
    for (const char* name : {"learned", "analytic", "default", "runtime"}) {
      const auto& m = report[name];
      const auto num = [](const nlohmann::json& v, const char* f) {
        return v.is_null() ? std::string("-") : fmt::format(fmt::runtime(f), v.get<double>());
      };
      const auto percent = [](const nlohmann::json& v) {
        return v.is_null() ? std::string("-") : fmt::format("{:.2f}%", 100 * v.get<double>());
      };
      std::cout << fmt::format("{:<10} {:>9}  {:>7} {:>7}  {:>6}  {:>9}  {:>6}  {:>6}\n", name,
                               percent(m["top1_regret_mean"]), percent(m["top1_regret_p90"]),
                               percent(m["top1_regret_max"]), num(m["top5_score"], "{:.3f}"),
                               num(m["kendall_tau"], "{:.3f}"), num(m["measurements_to_98"], "{:.0f}"),
                               num(m["measurements_to_99"], "{:.0f}"));
    }
    for (const char* name : {"learned", "analytic", "default", "runtime"}) {
      std::cout << fmt::format("{:<10} regret per {}:", name, split == "family" ? "held-out family" : "family");
      if (split == "host" && std::string(name) == "learned") {
        for (const auto& f : report["folds"])
          std::cout << fmt::format(" [held out {}: {:.2f}%]", f["held_out"].get<std::string>(),
                                   100 * f["learned_top1_regret_mean"].get<double>());
      }
      for (const auto& [family, r] : report[name]["top1_regret_by_family"].items())
        std::cout << fmt::format(" {} {:.2f}%", family, 100 * r.get<double>());
      std::cout << "\n";
    }
    std::cout << fmt::format(
        "runtime: the learned top-1 where its training covers the problem, else the default "
        "({} fallbacks)\n",
        report["runtime_fallbacks"].get<int>());
    std::cout << fmt::format("learned top-1 picks timed only once: {} (mean regret without them {:.2f}%)\n",
                             report["learned"]["top1_picks_timed_once"].get<int>(),
                             100 * report["learned"]["top1_regret_mean_picks_timed_twice"].get<double>());
    if (report.contains("retest")) {
      const auto& r = report["retest"];
      std::cout << fmt::format(
          "retest ({} problems measured twice): the first run's best, timed by the second: regret "
          "{:.2f}% mean, {:.2f}% p90;",
          r["problems"].get<int>(), 100 * r["regret_mean"].get<double>(), 100 * r["regret_p90"].get<double>());
      for (const auto& [family, v] : r["by_family"].items())
        std::cout << fmt::format(" {} {:.2f}%", family, 100 * v.get<double>());
      std::cout << "\n";
    }
    std::cout << fmt::format("ranking a whole space: {:.2f} ms median, {:.2f} ms max\n",
                             report["ranking_ms_median"].get<double>(), report["ranking_ms_max"].get<double>());
    return kOk;
  }
};

// The records the shipped model for `key` was trained on (its "trained_on" list), found in bench/records of the tree
// this runs in or of the one it was built from; a model without the list (or no shipped model for the key):
// `<key>.sqlite` there. None found: calibration trains on this host's shapes alone, as its report says.
std::vector<std::string> shipped_records(const std::string& key) {
  std::vector<std::string> names;
  try {
    const nlohmann::json model = nlohmann::json::parse(shipped_model_text(key));
    if (model.contains("trained_on")) names = model["trained_on"].get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception&) {
  }
  std::string file = key;
  for (char& c : file)
    if (c == ':') c = '_';
  if (names.empty()) names.push_back(file + ".sqlite");
  for (const std::string& dir : {std::string("bench/records"), std::string(TESSERA_SOURCE_DIR) + "/bench/records"}) {
    std::vector<std::string> found;
    for (const std::string& name : names)
      if (std::filesystem::exists(dir + "/" + name)) found.push_back(dir + "/" + name);
    if (found.size() == names.size()) return found;
  }
  return {};
}

// `tessera model calibrate`: adapts the cost model to this host. Shapes drawn as the holdout draws them are timed
// over their whole variant space on this host (2–5 minutes for the default 60, most of it the timing), and a model is
// trained on them together with the records the shipped model was trained on (each problem's features with its own
// machine's caches), then written where the runtime's "default" model looks first (calibrated_model_path).
struct CalibrateCommand {
  HoldoutOptions options;
  std::vector<std::string> base_records;
  std::string records_path, out;
  TrainingOptions training;
  bool json = false;

  int run() {
    const CpuTarget host = CpuTarget::host();
    const std::string key = host.cost_model_key();
    if (base_records.empty()) base_records = shipped_records(key);
    if (base_records == std::vector<std::string>{"none"}) base_records.clear();
    for (const std::string& path : base_records)
      if (!std::filesystem::exists(path)) throw InvalidArgument("--base-records", "no such file '" + path + "'");
    if (out.empty()) out = calibrated_model_path(host);
    if (out.empty()) throw Unavailable("no cache directory to keep the calibrated model in: give --out");
    if (records_path.empty()) records_path = out + ".records.sqlite";
    const auto start = std::chrono::steady_clock::now();

    RuntimeOptions runtime_options{host.str(), 1};
    runtime_options.cost_model = options.model = "shipped";
    Runtime runtime(runtime_options);
    std::filesystem::create_directories(std::filesystem::path(out).parent_path());
    nlohmann::json timed;
    {
      TuningRecords records(records_path);
      const bool tty = !json && ::isatty(STDERR_FILENO);
      timed = model_holdout(runtime, options, &records, [&](int done, int total, const std::string&) {
        if (tty) std::cerr << fmt::format("\rtimed {}/{} shapes", done, total) << (done == total ? "\n" : "");
      });
    }
    std::vector<TuningRecord> all =
        TuningRecords(records_path, TuningRecords::Access::ReadOnly).all("gemm", host.str());
    std::size_t base_measurements = 0;
    if (!base_records.empty()) {
      auto base = read_records(base_records, host.str(), "--base-records");
      base_measurements = base.size();
      all.insert(all.end(), std::make_move_iterator(base.begin()), std::make_move_iterator(base.end()));
    }
    const auto problems = recorded_problems(all, host.str(), RecordedHosts::every);
    if (problems.empty()) throw Error("no measurements to train on");
    const auto model = LearnedCpuModel::train(training_set(problems, host), host, training);
    write_model(*model, out, {});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    nlohmann::json report{{"model", out},
                          {"records", records_path},
                          {"base_records", base_records},
                          {"base_measurements", base_measurements},
                          {"shapes", options.shapes},
                          {"problems", problems.size()},
                          {"seconds", seconds},
                          {"shipped_regret_on_shapes", timed["runtime"]},
                          {"default_regret_on_shapes", timed["default"]}};
    if (json) {
      std::cout << report.dump() << "\n";
      return kOk;
    }
    std::cout << fmt::format(
        "calibrated {} in {:.0f} s: {} shapes timed here (the shipped model's pick lost {:.2f}% on them on "
        "average, default_for's {:.2f}%), trained on {} problems{} -> {}\n",
        key, seconds, options.shapes, 100 * timed["runtime"]["top1_regret_mean"].get<double>(),
        100 * timed["default"]["top1_regret_mean"].get<double>(), problems.size(),
        base_records.empty() ? "" : fmt::format(" with {}", fmt::join(base_records, ", ")), out);
    return kOk;
  }
};

void add_training_options(CLI::App& app, TrainingOptions& options) {
  app.add_option("--rounds", options.rounds, "the ranker's boosting rounds");
  app.add_option("--depth", options.max_depth, "the ranker's tree depth");
  app.add_option("--eta", options.learning_rate, "learning rate");
  app.add_option("--objective", options.objective, "ranker objective: rank:pairwise or rank:ndcg");
  app.add_option("--slowdown-rounds", options.slowdown_rounds, "the slowdown regression's boosting rounds");
  app.add_option("--slowdown-depth", options.slowdown_depth, "the slowdown regression's tree depth");
  app.add_option("--near-best-weight", options.near_best_weight,
                 "weight of a variant in the slowdown regression: 1 / (1 + this × log2 slowdown)");
  app.add_option("--ranker-weight", options.ranker_weight, "the ranker's share of the score (0: slowdown alone)");
  app.add_option("--seed", options.seed, "XGBoost's seed (row and column subsampling)");
  app.add_option("--parallel-trees", options.parallel_trees, "trees averaged per boosting round (bagging)");
}

// One line of a regret summary (regret_summary's members) in percent.
void print_regret(const char* name, const nlohmann::json& r) {
  std::cout << fmt::format("{:<16} mean {:5.2f}%  p90 {:5.2f}%  max {:5.2f}%\n", name,
                           100 * r["top1_regret_mean"].get<double>(), 100 * r["top1_regret_p90"].get<double>(),
                           100 * r["top1_regret_max"].get<double>());
}

// `tessera model holdout`: the runtime's own choice on shapes no suite holds, each timed over its whole space.
struct HoldoutCommand {
  HoldoutOptions options;
  std::string op = "gemm", records_path, suites, target = "cpu";
  int threads = 1;
  bool json = false, list_shapes = false;

  int run() {
    if (threads < 1) throw InvalidArgument("--threads", "must be >= 1");
    if (options.timing.samples < 1) throw InvalidArgument("--samples", "must be >= 1");
    if (!(options.timing.sample_ms > 0)) throw InvalidArgument("--sample-ms", "must be positive");
    if (suites.empty())  // the suites of the tree this runs in, or of the one it was built from
      for (const std::string& dir : {std::string("bench/suites"), std::string(TESSERA_SOURCE_DIR) + "/bench/suites"})
        if (std::filesystem::is_directory(dir)) {
          suites = dir;
          break;
        }
    if (op == "spmm" || op == "sddmm" || op == "attention") return run_op();
    if (op != "gemm") throw InvalidArgument("--op", "'" + op + "': expected gemm, spmm, sddmm or attention");
    std::size_t suite_files = 0;
    if (!suites.empty() && std::filesystem::is_directory(suites)) {
      for (const auto& entry : std::filesystem::directory_iterator(suites)) {
        if (entry.path().extension() != ".txt") continue;
        try {  // the attention and sparse suites are not GEMM shapes
          const auto shapes = load_shape_suite(entry.path().string(), suites);
          options.excluded.insert(options.excluded.end(), shapes.begin(), shapes.end());
          ++suite_files;
        } catch (const InvalidArgument&) {
        }
      }
    } else if (!suites.empty()) {
      throw InvalidArgument("--exclude-suites", "'" + suites + "' is not a directory");
    }
    if (list_shapes) {  // the draw as a suite file: what a training suite of such shapes starts from
      std::cout << fmt::format("# {} shapes drawn by `tessera model holdout --seed {}` ({} suite shapes excluded)\n",
                               options.shapes, options.seed, options.excluded.size());
      std::string family;
      for (const SuiteShape& s : draw_holdout_shapes(options)) {
        if (s.family != family) std::cout << "# family: " << (family = s.family) << "\n";
        std::cout << fmt::format("{} {} {}\n", s.m, s.n, s.k);
      }
      return kOk;
    }
    RuntimeOptions runtime_options{target, threads};
    runtime_options.cost_model = options.model;
    Runtime runtime(runtime_options);
    const auto records = open_records(records_path);
    const bool tty = !json && ::isatty(STDERR_FILENO);
    const nlohmann::json report =
        model_holdout(runtime, options, records.get(), [&](int done, int total, const std::string& line) {
          if (!json) std::cout << line << std::endl;
          if (tty) std::cerr << fmt::format("\r{}/{} shapes", done, total) << (done == total ? "\n" : "");
        });
    if (json) {
      nlohmann::json out = report;
      out["excluded_shapes"] = options.excluded.size();
      out["excluded_suite_files"] = suite_files;
      std::cout << out.dump() << "\n";
      return kOk;
    }
    std::cout << fmt::format("{} shapes (seed {}, {} thread{}, {}), {} suite shapes excluded; regret of the pick:\n",
                             report["shapes"].get<int>(), options.seed, threads, threads > 1 ? "s" : "",
                             report["target"].get<std::string>(), options.excluded.size());
    print_regret("runtime", report["runtime"]);
    print_regret("runtime retimed", report["runtime_retest"]);
    print_regret("default_for", report["default"]);
    print_regret("analytic", report["analytic"]);
    print_regret("learned alone", report["learned"]);
    print_regret("noise floor", report["noise_floor"]);
    for (const auto& [name, r] : report["compare"].items()) print_regret(name.c_str(), r);
    for (const auto& [name, c] : report["by_condition"].items())
      std::cout << fmt::format("{} shapes timed {}: runtime mean {:.2f}%, default_for {:.2f}%\n",
                               c["shapes"].get<int>(), name == "b_cold" ? "with B cold" : "with B warm",
                               100 * c["runtime"]["top1_regret_mean"].get<double>(),
                               100 * c["default"]["top1_regret_mean"].get<double>());
    std::cout << "picks by path:";
    for (const auto& [path, count] : report["paths"].items())
      std::cout << fmt::format(" {} {} (mean {:.2f}%)", path, count.get<int>(),
                               100 * report["regret_by_path"][path].get<double>());
    std::cout << "\n";
    return kOk;
  }

  // SpMM, SDDMM or attention: problems drawn outside the op's suite, the runtime's config judged against each
  // problem's whole space.
  int run_op() {
    OpHoldoutOptions o;
    o.op = op;
    o.problems = options.shapes;
    o.seed = options.seed;
    o.retest_top = options.retest_top;
    o.timing = options.timing;
    if (max_macs_given) o.max_macs = options.max_macs;
    if (!suites.empty()) {
      const std::string path = suites + "/" + op + ".txt";
      if (!std::filesystem::is_directory(suites))
        throw InvalidArgument("--exclude-suites", "'" + suites + "' is not a directory");
      std::ifstream in(path);
      for (std::string line; std::getline(in, line);) {
        std::istringstream words(line.substr(0, line.find('#')));
        if (op == "attention") {  // "B H KV SQ SKV D CAUSAL" as the holdout writes a problem
          long long b = 0, h = 0, kv = 0, sq = 0, skv = 0, d = 0;
          int causal = 0;
          if (words >> b >> h >> kv >> sq >> skv >> d >> causal)
            o.excluded.push_back(fmt::format("{}x{}/{}x{}:{} d{}{}", b, h, kv, sq, skv, d, causal ? " causal" : ""));
          continue;
        }
        std::string pattern, dense;
        if (words >> pattern >> dense) o.excluded.push_back(pattern + " " + dense);
      }
    }
    if (list_shapes) {
      std::cout << fmt::format(
          "# {} {} problems drawn by `tessera model holdout --op {} --seed {}` ({} suite cases "
          "excluded)\n",
          o.problems, op, op, o.seed, o.excluded.size());
      for (const HoldoutProblem& p : draw_op_holdout(o)) std::cout << p.key() << "\n";
      return kOk;
    }
    Runtime runtime({target, threads});
    const auto records = open_records(records_path);
    const bool tty = !json && ::isatty(STDERR_FILENO);
    nlohmann::json report = op_holdout(runtime, o, records.get(), [&](int done, int total, const std::string& line) {
      if (!json) std::cout << line << std::endl;
      if (tty) std::cerr << fmt::format("\r{}/{} problems", done, total) << (done == total ? "\n" : "");
    });
    if (json) {
      report["excluded_cases"] = o.excluded.size();
      std::cout << report.dump() << "\n";
      return kOk;
    }
    std::cout << fmt::format(
        "{} {} problems (seed {}, {} thread{}, {}), {} suite cases excluded; regret of the pick:\n",
        report["problems"].get<int>(), op, o.seed, threads, threads > 1 ? "s" : "", report["target"].get<std::string>(),
        o.excluded.size());
    print_regret("runtime", report["runtime"]);
    print_regret("runtime retimed", report["runtime_retest"]);
    print_regret("analytic", report["analytic"]);
    print_regret("noise floor", report["noise_floor"]);
    std::cout << "by pattern kind:";
    for (const auto& [kind, r] : report["by_kind"].items())
      std::cout << fmt::format(" {} {} (mean {:.2f}%)", kind, r["problems"].get<int>(),
                               100 * r["runtime"]["top1_regret_mean"].get<double>());
    std::cout << "\n";
    return kOk;
  }
  bool max_macs_given = false;
};
}  // namespace

void add_model_command(CLI::App& app, int& result) {
  auto cmd = std::make_shared<ModelCommand>();
  CLI::App* model = app.add_subcommand("model", "train and evaluate the learned cost model");
  model->require_subcommand(1);
  CLI::App* train = model->add_subcommand("train", "train the ranker and the time regression on tuning records");
  train->add_option("--records", cmd->records, "SQLite tuning records (several: merged as tune merge does)")
      ->required();
  train->add_option("--out", cmd->out, "model file to write (JSON)")->required();
  train->add_option("--target", cmd->target, "cpu, cpu:avx512 or cpu:avx2 (the records' target)");
  train->add_flag("--every-host", cmd->every_host,
                  "train on every machine's records (each with its own caches), not the most common machine's");
  add_training_options(*train, cmd->options);
  train->callback([cmd, &result] { result = guarded([&] { return cmd->train(); }); });
  CLI::App* features = model->add_subcommand("features", "write the training set (features and times) as CSV");
  features->add_option("--records", cmd->records, "SQLite tuning records (several: merged)")->required();
  features->add_option("--out", cmd->out, "CSV file to write")->required();
  features->add_option("--target", cmd->target, "cpu, cpu:avx512 or cpu:avx2 (the records' target)");
  features->callback([cmd, &result] { result = guarded([&] { return cmd->features(); }); });
  CLI::App* eval = model->add_subcommand("eval", "held-out evaluation of the learned, analytic and default choices");
  eval->add_option("--records", cmd->records, "SQLite tuning records (several: merged)")->required();
  eval->add_option("--split", cmd->split,
                   "random (5-fold), family (leave one shape family out) or host (leave one machine out)");
  eval->add_flag("--every-host", cmd->every_host, "every machine's records (host split implies it)");
  eval->add_option("--target", cmd->target, "cpu, cpu:avx512 or cpu:avx2");
  add_training_options(*eval, cmd->options);
  eval->add_option("--retest", cmd->retest,
                   "records of the same problems measured again: reports the noise floor of a top-1 regret");
  eval->add_option("--families", cmd->families,
                   "score only held-out problems of these families (all still train), e.g. llm,odd")
      ->delimiter(',');
  eval->add_flag("--json", cmd->json, "print one JSON object");
  eval->callback([cmd, &result] { result = guarded([&] { return cmd->eval(); }); });

  auto holdout_cmd = std::make_shared<HoldoutCommand>();
  CLI::App* holdout = model->add_subcommand(
      "holdout",
      "the regret of the runtime's own GEMM choice on random shapes no suite holds, each timed exhaustively");
  HoldoutOptions& o = holdout_cmd->options;
  holdout->add_option("--op", holdout_cmd->op, "gemm (default), spmm, sddmm or attention");
  holdout->add_option("--shapes", o.shapes, "shapes (problems) drawn");
  holdout->add_option("--seed", o.seed, "seed of the draw");
  holdout->add_option("--threads", holdout_cmd->threads, "threads of the runtime (and of every timed call)");
  holdout->add_option("--target", holdout_cmd->target, "cpu, cpu:avx512 or cpu:avx2");
  holdout->add_option("--skinny-share", o.skinny_share, "share of skinny shapes (M 1-64, N and K 256-4096)");
  holdout->add_option("--min-dim", o.min_dim, "smallest M, N, K of the other shapes");
  holdout->add_option("--max-dim", o.max_dim, "largest M, N, K of the other shapes");
  holdout->add_option("--max-macs", o.max_macs, "largest M·N·K drawn (sparse: stored entries × N or K)")
      ->each([holdout_cmd](const std::string&) { holdout_cmd->max_macs_given = true; });
  holdout->add_option("--retest-top", o.retest_top, "leaders of the first timing timed again (the noise floor)");
  holdout->add_option("--samples", o.timing.samples, "interleaved rounds per variant");
  holdout->add_option("--sample-ms", o.timing.sample_ms, "length of one sample");
  holdout->add_option("--model", o.model, "the runtime's cost model: default, analytic, heuristic or a model file");
  holdout->add_option("--compare", o.compare, "other models (names or files) judged on the same timings")
      ->delimiter(',');
  holdout->add_option("--exclude-suites", holdout_cmd->suites,
                      "directory of the suites whose shapes are not drawn (default: bench/suites here or in the source "
                      "tree)");
  holdout->add_option("--records", holdout_cmd->records_path, "SQLite tuning records to keep the first timing in");
  holdout->add_flag("--json", holdout_cmd->json, "print one JSON object");
  holdout->add_flag("--list-shapes", holdout_cmd->list_shapes, "print the drawn shapes as a suite file; time nothing");
  holdout->callback([holdout_cmd, &result] { result = guarded([&] { return holdout_cmd->run(); }); });

  auto calibrate_cmd = std::make_shared<CalibrateCommand>();
  calibrate_cmd->options.shapes = 60;
  calibrate_cmd->options.seed = 1000001;  // a draw apart from the holdout seeds that judge it
  // Half skinny: the shapes whose best config moves most between host kinds (B streamed or cold; Zen 5 against the
  // Xeon's records: 60 shapes at 25% skinny took the held-out regret from 12.3% to 7.0%, at 50% to 3.7%).
  calibrate_cmd->options.skinny_share = 0.5;
  CLI::App* calibrate = model->add_subcommand(
      "calibrate", "adapt the cost model to this host: time random shapes here and retrain (2–5 minutes)");
  calibrate->add_option("--shapes", calibrate_cmd->options.shapes, "shapes timed exhaustively on this host");
  calibrate->add_option("--seed", calibrate_cmd->options.seed, "seed of the draw");
  calibrate->add_option("--skinny-share", calibrate_cmd->options.skinny_share, "share of skinny shapes (0.5)");
  calibrate->add_option("--max-dim", calibrate_cmd->options.max_dim, "largest M, N, K of the other shapes");
  calibrate->add_option("--base-records", calibrate_cmd->base_records,
                        "records to train on beside this host's (default: those the shipped model was trained on, from "
                        "the source tree; none: this host's only)");
  calibrate->add_option("--records", calibrate_cmd->records_path,
                        "where this host's timings are kept (default: beside the model)");
  calibrate->add_option("--out", calibrate_cmd->out,
                        "the model file (default: where the runtime's default model looks for this host's)");
  calibrate->add_option("--rounds", calibrate_cmd->training.rounds, "the ranker's boosting rounds (as model train)");
  calibrate->add_option("--slowdown-rounds", calibrate_cmd->training.slowdown_rounds,
                        "the slowdown regression's boosting rounds (as model train)");
  calibrate->add_flag("--json", calibrate_cmd->json, "print one JSON object");
  calibrate->callback([calibrate_cmd, &result] { result = guarded([&] { return calibrate_cmd->run(); }); });
}

}  // namespace tessera::cli
