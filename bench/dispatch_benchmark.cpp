#include "bench/dispatch_benchmark.hpp"

#include <fmt/format.h>
#include <libxsmm.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include <nlohmann/json.hpp>
#include "generator/core/arith.hpp"
#include "tessera/tessera.hpp"

namespace tessera::bench {

namespace {

// Nanoseconds per call of `call`, run back to back for about sample_ms.
double ns_per_call(const std::function<void()>& call, double sample_ms) {
  using clock = std::chrono::steady_clock;
  int calls = 16;
  for (;;) {
    const auto start = clock::now();
    for (int i = 0; i < calls; ++i) call();
    const double ns = std::chrono::duration<double, std::nano>(clock::now() - start).count();
    if (ns >= sample_ms * 1e6 || calls >= (1 << 24)) return ns / calls;
    calls = static_cast<int>(std::min<double>(1 << 24, calls * std::max(2.0, 1.2 * sample_ms * 1e6 / ns)));
  }
}

}  // namespace

nlohmann::json run_dispatch_benchmark(const std::vector<GemmShape>& shapes, int repeat, const Sampling& sampling,
                                      std::ostream& log) {
  RuntimeOptions options;
  options.threads = 1;
  Runtime runtime(options);
  libxsmm_init();
  nlohmann::json rows = nlohmann::json::array();
  log << fmt::format("{:<14} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12} {:>12}\n", "shape", "prepared", "kernel.run",
                     "rt.gemm", "rt.gemm -", "libxsmm", "libxsmm", "libxsmm");
  log << fmt::format("{:<14} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12} {:>12}\n", "", "ns", "ns", "ns", "prepared",
                     "call ns", "dispatch+call", "dispatch");
  for (const GemmShape& s : shapes) {
    std::vector<float> a(static_cast<std::size_t>(s.m * s.k), 0.5f), b(static_cast<std::size_t>(s.k * s.n), 0.25f),
        d(static_cast<std::size_t>(s.m * s.n));
    GemmArgs args;
    args.a = Tensor::matrix(a.data(), s.m, s.k, Layout::row_major(), s.k);
    args.b = Tensor::matrix(b.data(), s.k, s.n, Layout::row_major(), s.n);
    args.d = Tensor::matrix(d.data(), s.m, s.n, Layout::row_major(), s.n);
    const GemmKernel kernel = runtime.compile(runtime.describe(args));
    const PreparedGemm prepared = kernel.prepare(args);
    // LIBXSMM is column-major: C = A·B row-major runs as Cᵀ = Bᵀ·Aᵀ.
    const auto xsmm_dispatch = [&] {
      const libxsmm_blasint m = static_cast<libxsmm_blasint>(s.n), n = static_cast<libxsmm_blasint>(s.m),
                            k = static_cast<libxsmm_blasint>(s.k);
      const float alpha = 1, beta = 0;
      return libxsmm_smmdispatch(m, n, k, &m, &k, &m, &alpha, &beta, nullptr, nullptr);
    };
    const libxsmm_smmfunction xsmm = xsmm_dispatch();
    std::vector<std::pair<const char*, std::function<void()>>> paths{
        {"prepared", [&] { prepared.run(); }},
        {"kernel_run", [&] { kernel.run(args); }},
        {"runtime_gemm", [&] { runtime.gemm(args); }},
        {"libxsmm_call", [&] { xsmm(b.data(), a.data(), d.data()); }},
        {"libxsmm_dispatch_call", [&] { xsmm_dispatch()(b.data(), a.data(), d.data()); }}};
    if (!xsmm) paths.resize(3);
    std::vector<std::vector<double>> samples(paths.size());
    for (int r = 0; r < repeat; ++r)
      for (std::size_t p = 0; p < paths.size(); ++p)
        samples[p].push_back(ns_per_call(paths[p].second, sampling.sample_ms));
    nlohmann::json row{{"shape", s.label()}, {"m", s.m}, {"n", s.n}, {"k", s.k}, {"kernel", kernel.name()}};
    for (std::size_t p = 0; p < paths.size(); ++p) row[std::string(paths[p].first) + "_ns"] = median(samples[p]);
    const double prepared_ns = row["prepared_ns"], gemm_ns = row["runtime_gemm_ns"];
    row["runtime_gemm_overhead_ns"] = gemm_ns - prepared_ns;
    row["kernel_run_overhead_ns"] = row["kernel_run_ns"].get<double>() - prepared_ns;
    const double x_call = xsmm ? row["libxsmm_call_ns"].get<double>() : 0;
    const double x_both = xsmm ? row["libxsmm_dispatch_call_ns"].get<double>() : 0;
    if (xsmm) row["libxsmm_dispatch_overhead_ns"] = x_both - x_call;
    log << fmt::format("{:<14} {:>10.0f} {:>10.0f} {:>10.0f} {:>10.0f} {:>12.0f} {:>12.0f} {:>12.0f}\n", s.label(),
                       prepared_ns, row["kernel_run_ns"].get<double>(), gemm_ns, gemm_ns - prepared_ns, x_call, x_both,
                       x_both - x_call);
    rows.push_back(row);
  }
  libxsmm_finalize();
  return rows;
}

}  // namespace tessera::bench
