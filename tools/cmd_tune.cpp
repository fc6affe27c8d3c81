// `tessera tune gemm --suite FILE [--top-k K | --exhaustive] [--records DB]`: tunes each shape of a suite and
// records every measurement; a progress bar with the time left goes to stderr, one line per shape to stdout.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include <unistd.h>

#include "cli_common.hpp"
#include "commands.hpp"
#include "generator/core/cuda_rates.hpp"
#include "generator/gemm/cuda_gemm_model.hpp"
#include "generator/gemm/cuda_gemm_spec.hpp"
#include "generator/gemm/gemm_variants.hpp"
#include "generator/gemm/shape_suite.hpp"
#include "tessera/cost_models.hpp"
#include "tessera/tuner.hpp"
#include "tessera/tuning_records.hpp"

namespace tessera::cli {

namespace {
struct TuneCommand {
  std::string suite, shapes, records_path, model = "default", dtype = "f32", layout_a = "row", layout_b = "row",
                                           target = "cpu";
  int top_k = 8;
  bool exhaustive = false;
  int threads = 1;
  TuneOptions options;

  // A CUDA target: the space is enumerated and ranked by the analytic model; nothing can be measured without a GPU,
  // and no records exist for one, which the output says.
  int run_cuda(const std::vector<SuiteShape>& list) const {
    const CudaTarget t = CudaTarget::parse(target);
    const auto dt = parse_dtype(dtype);
    if (!dt || !dtype_info(*dt).is_float) throw InvalidArgument("--dtype", "must be f16, bf16, tf32 or f32");
    std::cerr << fmt::format(
        "tessera tune: {} is ranked by the analytic model: there are no measurements for it (no "
        "GPU here), so nothing is timed\n",
        t.str());
    for (const auto& s : list) {
      GemmProblem p;
      p.m = s.m, p.n = s.n, p.k = s.k, p.batch = s.batch;
      p.signature.a = {*dt, layout_option(layout_a, "--layout-a")};
      p.signature.b = {*dt, layout_option(layout_b, "--layout-b")};
      p.signature.c = {DType::f32, Layout::zero()};
      p.signature.d = {DType::f32, Layout::row_major()};
      const auto space = cuda_variants(p, t);
      const auto scores = cuda_analytic_scores(p, space, t);
      const auto order = rank_by_score(scores);
      // Percentages are of the device's peak (wgmma's on Hopper, which today's kernels do not use).
      const double peak = cuda_peak_flops(t, *dt, true);
      std::cout << fmt::format(
          "{}x{}x{} [{}] {} variants; analytic top {} (peak {:.1f} TFLOP/s{}):\n", p.m, p.n, p.k, s.family,
          space.size(), std::min<std::size_t>(static_cast<std::size_t>(top_k), space.size()), peak / 1e12,
          peak > cuda_peak_flops(t, *dt) ? fmt::format(", {:.1f} through mma.sync", cuda_peak_flops(t, *dt) / 1e12)
                                         : "");
      for (std::size_t i = 0; i < std::min<std::size_t>(static_cast<std::size_t>(top_k), space.size()); ++i) {
        const CudaGemmEstimate e = cuda_gemm_estimate(p, space[order[i]], t);
        std::cout << fmt::format("  {:.1f} TFLOP/s predicted ({:.0f}% of peak, bound by {}, SMs {:.0f}% busy)  {}\n",
                                 p.flops() / e.seconds / 1e12, 100 * p.flops() / e.seconds / peak, e.bound,
                                 100 * e.sm_busy, CudaGemmSpec{p.signature, space[order[i]], t}.name());
      }
    }
    return kOk;
  }

  static Layout layout_option(const std::string& text, const char* option) {
    const auto l = Layout::parse(text);
    if (!l || (l->kind() != LayoutKind::RowMajor && l->kind() != LayoutKind::ColMajor))
      throw InvalidArgument(option, "must be row or col");
    return *l;
  }

  int run() {
    if (suite.empty() == shapes.empty()) throw InvalidArgument("--suite/--shapes", "give exactly one");
    if (top_k < 1) throw InvalidArgument("--top-k", "must be >= 1");
    if (threads < 1) throw InvalidArgument("--threads", "must be >= 1");
    const std::vector<SuiteShape> list =
        suite.empty() ? parse_shape_list(shapes) : load_shape_suite(suite, "bench/suites");
    if (CudaTarget::is_cuda_text(target)) return run_cuda(list);
    const auto dt = parse_dtype(dtype);
    if (!dt || (*dt != DType::f32 && *dt != DType::bf16 && *dt != DType::i8))
      throw InvalidArgument("--dtype", "must be f32, bf16 or i8 (u8 A, i8 B)");
    const auto la = Layout::parse(layout_a), lb = Layout::parse(layout_b);
    if (!la || !lb || !la->reads_memory() || !lb->reads_memory() || la->kind() == LayoutKind::Strided ||
        lb->kind() == LayoutKind::Strided)
      throw InvalidArgument("--layout-a/--layout-b", "must be row or col");
    Runtime runtime({target, threads});
    const auto cost_model = load_cpu_cost_model(model, runtime.target());
    if (!cost_model.model) throw InvalidArgument("--model", "tuning ranks variants: default, analytic or a model file");
    std::unique_ptr<TuningRecords> records;
    if (!records_path.empty()) records = std::make_unique<TuningRecords>(records_path);
    options.top_k = top_k;
    options.exhaustive = exhaustive;
    Tuner tuner(runtime, cost_model.model, records.get(), options);
    TuneOptions cold_options = options;
    cold_options.cold_b = true;
    Tuner cold_tuner(runtime, cost_model.model, records.get(), cold_options);  // for a suite's b-cold families
    std::cerr << fmt::format(
        "tessera tune: {} shapes, {} on {} thread(s), ranked by the {} model{} where it covers a shape, else "
        "the analytic model\n",
        list.size(), exhaustive ? "every variant" : fmt::format("top {}", top_k), threads, cost_model.model->name(),
        cost_model.note.empty() ? "" : " (" + cost_model.note + ")");
    const auto start = std::chrono::steady_clock::now();
    // A shape's share of the run: compiling and timing its variants costs about as much as 2·10⁸ flops of calls
    // (samples are a fixed length), plus its flops. An exhaustive run of bench/suites/tuning.txt (430 shapes of up to
    // 1.1 GFLOP): counting flops alone, it foresaw 5.5 hours after the first minute of 25; with this, 25 minutes
    // after the first minute of 36 (--refine-samples 15, whose extra rounds it does not foresee).
    constexpr double kShapeCost = 2e8;
    double flops_done = 0, flops_total = 0;
    for (const auto& s : list) flops_total += 2.0 * static_cast<double>(s.m * s.n * s.k * s.batch) + kShapeCost;
    // Progress frames go to a terminal only: a redirected log gets the result lines.
    const bool terminal = isatty(STDERR_FILENO);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const SuiteShape& s = list[i];
      GemmProblem p;
      p.m = s.m, p.n = s.n, p.k = s.k, p.batch = s.batch;
      // A family that names its layouts keeps them: a suite can mix every layout pair.
      const auto layout = [&](bool col) { return col ? Layout::col_major() : Layout::row_major(); };
      p.signature.a = {*dt == DType::i8 ? DType::u8 : *dt, s.layouts_given() ? layout(s.a_col) : *la};
      p.signature.b = {*dt, s.layouts_given() ? layout(s.b_col) : *lb};
      if (*dt == DType::i8) p.signature.accumulator = DType::i32;
      p.signature.c = {DType::f32, Layout::zero()};
      p.signature.d = {DType::f32, Layout::row_major()};
      auto last_update = std::chrono::steady_clock::now() - std::chrono::seconds(1);
      const auto progress = [&](int done, int total) {
        const auto now = std::chrono::steady_clock::now();
        if (!terminal || (now - last_update < std::chrono::milliseconds(250) && done != total)) return;
        last_update = now;
        // Time left from the share of the suite's work (by flops, plus a fixed cost per shape) done so far.
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double share = (flops_done + (p.flops() + kShapeCost) * done / std::max(total, 1)) / flops_total;
        const double left = share > 0 ? elapsed * (1 - share) / share : 0;
        const int width = 30, filled = static_cast<int>(share * width);
        std::cerr << fmt::format("\r[{}{}] shape {}/{} sample {}/{} · {:.0f}s elapsed, ~{:.0f}s left   ",
                                 std::string(static_cast<std::size_t>(filled), '#'),
                                 std::string(static_cast<std::size_t>(width - filled), '.'), i + 1, list.size(), done,
                                 total, elapsed, left)
                  << std::flush;
      };
      const TuneResult r = (s.cold_b ? cold_tuner : tuner).tune(p, s.family, progress);
      flops_done += p.flops() + kShapeCost;
      if (r.measured.empty()) continue;
      const VariantMeasurement& best = r.measured[r.best];
      const double default_ns = [&] {
        const CpuGemmConfig d = CpuGemmConfig::default_for(r.problem, runtime.target());
        for (const auto& m : r.measured)
          if (m.config == d) return m.median_ns;
        return 0.0;
      }();
      if (terminal) std::cerr << "\r" << std::string(100, ' ') << "\r";
      std::cout << fmt::format("{}x{}x{}{} [{}{}] best {} {:.1f} GFLOP/s{} · measured {} of {} ({} new)\n", p.m, p.n,
                               p.k, p.batch > 1 ? fmt::format("x{}", p.batch) : "", s.family,
                               s.cold_b || options.cold_b ? ", B cold" : "",
                               CpuGemmSpec{r.problem.signature, best.config, runtime.target()}.name(),
                               p.flops() / best.median_ns,
                               default_ns > 0 ? fmt::format(" (default {:.1f})", p.flops() / default_ns) : "",
                               r.measured.size(), r.space, r.compiled)
                << std::flush;
    }
    return kOk;
  }
};

// `tessera tune merge --out DB RUN.sqlite...`: runs of the same problems at different times, merged into records
// whose every measurement is the median over the runs that took it.
struct MergeCommand {
  std::vector<std::string> runs;
  std::string out;

  int run() const {
    if (runs.size() < 2) throw InvalidArgument("RUN", "give at least two runs to merge");
    if (std::filesystem::exists(out)) throw InvalidArgument("--out", "'" + out + "' exists: merge into a new file");
    std::vector<std::vector<TuningRecord>> loaded;
    for (const std::string& path : runs) {
      if (!std::filesystem::is_regular_file(path)) throw InvalidArgument("RUN", "'" + path + "' is not a file");
      loaded.push_back(TuningRecords(path, TuningRecords::Access::ReadOnly).all());
      if (loaded.back().empty()) throw InvalidArgument("RUN", "'" + path + "' holds no measurements");
    }
    const std::vector<TuningRecord> merged = merge_tuning_runs(loaded);
    // Written next to its destination and renamed: a failed merge leaves no partial database.
    const std::string tmp = fmt::format("{}.tmp-{}", out, getpid());
    try {
      TuningRecords(tmp).add(merged);
      std::filesystem::rename(tmp, out);
    } catch (...) {
      std::filesystem::remove(tmp);
      throw;
    }
    std::size_t in = 0;
    for (const auto& run : loaded) in += run.size();
    std::cout << fmt::format("merged {} measurements of {} runs into {} ({} measurements)\n", in, runs.size(), out,
                             merged.size());
    return kOk;
  }
};
}  // namespace

void add_tune_command(CLI::App& app, int& result) {
  auto cmd = std::make_shared<TuneCommand>();
  CLI::App* tune = app.add_subcommand("tune", "measure kernel variants and record the measurements");
  tune->require_subcommand(1);
  CLI::App* gemm = tune->add_subcommand("gemm", "tune the GEMMs of a shape suite");
  gemm->add_option("--suite", cmd->suite, "a suite file, or a name in bench/suites");
  gemm->add_option("--shapes", cmd->shapes, "MxNxK[xBATCH],...");
  CLI::Option* top_k = gemm->add_option("--top-k", cmd->top_k,
                                        "variants to compile and measure per shape, best-ranked first (default 8)");
  gemm->add_flag("--exhaustive", cmd->exhaustive, "measure every variant of the space")->excludes(top_k);
  gemm->add_option("--records", cmd->records_path, "SQLite database to record into (and resume from)");
  gemm->add_option("--threads", cmd->threads, "threads per call (default 1)");
  gemm->add_option("--model", cmd->model,
                   "ranking: default (the shipped model for this CPU), analytic, or a model file");
  gemm->add_option("--dtype", cmd->dtype, "f32, bf16 or i8 (u8 A, i8 B) (CUDA: f16, bf16, tf32, f32)");
  gemm->add_option("--target", cmd->target, "cpu, cpu:avx512, cpu:avx2, or cuda:sm_XX (ranked, not measured)");
  gemm->add_option("--layout-a", cmd->layout_a, "row or col");
  gemm->add_option("--layout-b", cmd->layout_b, "row or col");
  gemm->add_option("--samples", cmd->options.samples,
                   "samples per variant, taken in interleaved rounds (median recorded)")
      ->check(CLI::Range(1, 1000));
  gemm->add_option("--sample-ms", cmd->options.sample_ms, "length of one sample")->check(CLI::Range(0.001, 60000.0));
  gemm->add_option("--refine-samples", cmd->options.refine_samples,
                   "samples more for the variants within --refine-within of the best median (default 0)")
      ->check(CLI::Range(0, 1000));
  gemm->add_option("--refine-within", cmd->options.refine_within,
                   "how close to the best median a variant must be to be refined (default 0.10)")
      ->check(CLI::Range(0.0, 10.0));
  gemm->add_flag("--cold-b", cmd->options.cold_b,
                 "evict B from the caches before each timed call, for every shape (weights streamed from memory; a "
                 "suite asks it per family with '# family: NAME b-cold')");
  gemm->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });

  add_tune_attention_command(*tune, result);
  add_tune_sparse_commands(*tune, result);
  auto merge_cmd = std::make_shared<MergeCommand>();
  CLI::App* merge = tune->add_subcommand(
      "merge", "merge tuning runs of the same problems: each measurement the median over the runs that took it");
  merge->add_option("runs", merge_cmd->runs, "records databases of the runs")->required()->type_name("RUN");
  merge->add_option("--out", merge_cmd->out, "the merged records database (a new file)")->required();
  merge->callback([merge_cmd, &result] { result = guarded([&] { return merge_cmd->run(); }); });
}

}  // namespace tessera::cli
