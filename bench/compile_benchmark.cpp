#include "bench/compile_benchmark.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "generator/core/arith.hpp"
#include "tessera/tessera.hpp"

namespace tessera::bench {

namespace {

// One kernel's problem with buffers for every operand it reads.
struct CompileCase {
  std::string title;
  std::int64_t m, n, k, batch;
  bool a_col, b_col;
  std::string epilogue;  // empty: the default linear combination
  float beta;

  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * batch;
  }
};

struct CaseBuffers {
  std::vector<float> a, b, c, d, bias, residual;
  GemmArgs args;

  explicit CaseBuffers(const CompileCase& k) {
    const auto fill = [](std::vector<float>& v, std::size_t size, float scale) {
      v.resize(size);
      for (std::size_t i = 0; i < size; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i * 7919 % 61) - 30);
    };
    const auto batch = static_cast<std::size_t>(k.batch), mn = static_cast<std::size_t>(k.m * k.n);
    fill(a, static_cast<std::size_t>(k.m * k.k) * batch, 1.0f / 64);
    fill(b, static_cast<std::size_t>(k.k * k.n) * batch, 1.0f / 32);
    d.assign(mn * batch, 0.0f);
    const Layout la = k.a_col ? Layout::col_major() : Layout::row_major();
    const Layout lb = k.b_col ? Layout::col_major() : Layout::row_major();
    const std::int64_t lda = k.a_col ? k.m : k.k, ldb = k.b_col ? k.k : k.n;
    const auto matrix = [&](std::vector<float>& v, std::int64_t rows, std::int64_t cols, Layout layout,
                            std::int64_t ld) {
      return k.batch == 1 ? Tensor::matrix(v.data(), rows, cols, layout, ld)
                          : Tensor::batched(v.data(), k.batch, rows, cols, layout, ld, rows * cols);
    };
    args.a = matrix(a, k.m, k.k, la, lda);
    args.b = matrix(b, k.k, k.n, lb, ldb);
    args.d = matrix(d, k.m, k.n, Layout::row_major(), k.n);
    if (k.beta != 0) {
      fill(c, mn * batch, 1.0f / 16);
      args.c = matrix(c, k.m, k.n, Layout::row_major(), k.n);
      args.beta = k.beta;
    }
    if (k.epilogue.empty()) return;
    args.set_epilogue(k.epilogue);
    if (k.epilogue.find("bias") != std::string::npos) {
      fill(bias, static_cast<std::size_t>(k.n), 1.0f / 8);
      args.inputs["bias"] = Tensor::vector(bias.data(), k.n);
    }
    if (k.epilogue.find("residual") != std::string::npos) {
      fill(residual, mn, 1.0f / 8);
      args.inputs["residual"] = Tensor::matrix(residual.data(), k.m, k.n, Layout::row_major(), k.n);
    }
  }
};

std::vector<CompileCase> compile_cases() {
  return {
      // tessera demo's kernels
      {"demo: plain 1024^3", 1024, 1024, 1024, 1, false, false, "", 0},
      {"demo: gelu(acc + bias[n]) 1024^3", 1024, 1024, 1024, 1, false, false, "gelu(acc + bias[n])", 0},
      {"demo: 128^3 x32, A and B col, beta 1", 128, 128, 128, 32, true, true, "", 1},
      {"demo: 509x77x1031 silu + residual", 509, 77, 1031, 1, true, false, "silu(alpha*acc + residual[m,n])", 0},
      // the runtime's picks on bench/suites/quick.txt
      {"quick: 64^3", 64, 64, 64, 1, false, false, "", 0},
      {"quick: 256^3", 256, 256, 256, 1, false, false, "", 0},
      {"quick: 1023^3", 1023, 1023, 1023, 1, false, false, "", 0},
      {"quick: 8x4096x4096", 8, 4096, 4096, 1, false, false, "", 0},
      {"quick: 32^3 x256", 32, 32, 32, 256, false, false, "", 0},
  };
}

}  // namespace

nlohmann::json run_compile_benchmark(int repeat, int threads, const Sampling& sampling, std::ostream& log) {
  RuntimeOptions options;
  options.threads = threads;
  options.disk_cache = false;
  const std::vector<CompileCase> cases = compile_cases();
  std::vector<std::unique_ptr<CaseBuffers>> buffers;
  for (const auto& c : cases) buffers.push_back(std::make_unique<CaseBuffers>(c));
  std::vector<std::vector<double>> compile_ms(cases.size());
  std::vector<std::string> names(cases.size());
  // Interleaved: each round compiles every kernel once in a runtime of its own, so that nothing is cached.
  for (int r = 0; r < repeat; ++r)
    for (std::size_t i = 0; i < cases.size(); ++i) {
      Runtime runtime(options);
      const GemmKernel kernel = runtime.compile(runtime.describe(buffers[i]->args));
      compile_ms[i].push_back(kernel.compile_ms());
      names[i] = kernel.name();
    }
  log << fmt::format("{:<40} {:<58} {:>11} {:>9} {:>9}\n", "case", "kernel", "compile ms", "min ms", "GFLOP/s");
  nlohmann::json rows = nlohmann::json::array();
  Runtime runtime(options);
  std::vector<double> medians;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const GemmKernel kernel = runtime.compile(runtime.describe(buffers[i]->args));
    const auto call = [&] { kernel.run(buffers[i]->args); };
    const int calls = sampling.calibrate(call);
    std::vector<double> seconds;
    for (int r = 0; r < repeat; ++r) seconds.push_back(sampling.sample(call, calls, false));
    const double gflops = cases[i].flops() / median(seconds) / 1e9;
    const double med = median(compile_ms[i]);
    medians.push_back(med);
    const double min = *std::min_element(compile_ms[i].begin(), compile_ms[i].end());
    log << fmt::format("{:<40} {:<58} {:>11.2f} {:>9.2f} {:>9.1f}\n", cases[i].title, names[i], med, min, gflops);
    rows.push_back({{"case", cases[i].title},
                    {"kernel", names[i]},
                    {"compile_ms", med},
                    {"compile_ms_min", min},
                    {"compile_ms_samples", compile_ms[i]},
                    {"gflops", gflops}});
  }
  log << fmt::format("median over the kernels: {:.2f} ms\n", median(medians));
  return rows;
}

}  // namespace tessera::bench
