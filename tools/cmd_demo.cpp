// `tessera demo`: JIT-compiles a handful of kernels, verifies each against the reference and prints a table.
#include <fmt/format.h>

#include <iostream>

#include "cli_common.hpp"
#include "commands.hpp"

namespace tessera::cli {

namespace {

struct DemoCase {
  const char* title;
  GemmRequest request;
};

int run_demo(int threads) {
  Runtime runtime({"cpu", threads, 0});
  std::vector<DemoCase> cases;
  const auto add = [&](const char* title, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                       const char* la, const char* lb, const char* epilogue, float beta) {
    GemmRequest r;
    r.m = m;
    r.n = n;
    r.k = k;
    r.batch = batch;
    r.layout_a = la;
    r.layout_b = lb;
    r.epilogue = epilogue;
    r.epilogue_given = *epilogue != '\0';
    r.beta = beta;
    cases.push_back({title, r});
  };
  add("plain GEMM", 1024, 1024, 1024, 1, "row", "row", "", 0);
  add("GEMM + bias + GELU", 1024, 1024, 1024, 1, "row", "row", "gelu(acc + bias[n])", 0);
  add("batched, column-major A and B", 128, 128, 128, 32, "col", "col", "", 1);
  add("odd sizes, residual + SiLU", 509, 77, 1031, 1, "col", "row", "silu(alpha*acc + residual[m,n])", 0);

  std::cout << fmt::format("tessera demo on {} with {} thread(s)\n\n", runtime.target().str(), runtime.threads());
  std::cout << fmt::format("{:<32} {:<58} {:>10} {:>9} {:>9} {:>9} {:>10}  {}\n", "case", "kernel", "compile ms",
                           "hit us", "run ms", "GFLOP/s", "max err", "check");
  bool all_ok = true;
  for (const auto& c : cases) {
    const GemmRun r = run_gemm(runtime, c.request, 5, true);
    all_ok &= r.ok();
    std::cout << fmt::format("{:<32} {:<58} {:>10.2f} {:>9.1f} {:>9.3f} {:>9.1f} {:>10.2e}  {}\n", c.title,
                             r.spec.name(), r.compile_ms, r.cache_hit_us, r.median_ms, r.gflops,
                             r.comparison.max_abs_err, r.ok() ? "ok" : "FAILED " + r.comparison.first_mismatch);
  }
  return all_ok ? kOk : kVerifyFailed;
}

}  // namespace

void add_demo_command(CLI::App& app, int& result) {
  auto threads = std::make_shared<int>(0);
  CLI::App* sub = app.add_subcommand("demo", "compile, verify and time a few kernels");
  sub->add_option("--threads", *threads, "threads to run on (0: all)");
  sub->callback([threads, &result] { result = guarded([&] { return run_demo(*threads); }); });
}

}  // namespace tessera::cli
