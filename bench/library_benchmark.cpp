#include "bench/library_benchmark.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>
#include "ops/library/library_builder.hpp"
#include "tessera/attention.hpp"
#include "tessera/sparse.hpp"
#include "tessera/tessera.hpp"

namespace tessera::bench {

namespace {

// The library's C ABI (the header `tessera library build` writes for a library named benchlib).
struct CTensor {
  const void* data;
  std::int64_t rs, cs, bs;
};
struct CGemmArgs {
  std::int64_t m, n, k, batch;
  CTensor a, b, c, d;
  const CTensor* inputs;
  float alpha, beta;
  int threads;
};
using CGemmFn = int (*)(const CGemmArgs*);
struct CSparse {
  std::int64_t rows, cols, entries;
  const void *row_offsets, *col_indices, *values;
};
struct CSpmmArgs {
  CSparse a;
  std::int64_t n;
  CTensor b, c, d;
  const CTensor* inputs;
  float alpha, beta;
  int threads;
};
struct CSddmmArgs {
  CSparse pattern;
  std::int64_t k;
  CTensor a, b;
  float* out;
  const CTensor* inputs;
  float alpha;
  int threads;
};
using CSpmmFn = int (*)(const CSpmmArgs*);
struct CTensor4 {
  const void* data;
  std::int64_t strides[4];
};
struct CAttentionArgs {
  std::int64_t batch, heads, kv_heads, seq_q, seq_kv;
  const std::int64_t *offsets_q, *offsets_kv;
  CTensor4 q, k, v, o;
  float* lse;
  std::int64_t lse_strides[3];
  const float* scalars;
  float scale;
  int threads;
};
using CAttentionFn = int (*)(const CAttentionArgs*);
std::string attention_entry(const AttentionShape& s) {
  return fmt::format("att_d{}{}", s.head_dim, s.causal ? "c" : "");
}
using CSddmmFn = int (*)(const CSddmmArgs*);

std::vector<float> small_integers(std::size_t count, int modulus) {
  std::vector<float> x(count);
  for (std::size_t i = 0; i < count; ++i) x[i] = static_cast<float>(static_cast<int>(i % modulus) - modulus / 2);
  return x;
}

// Times two calls interleaved; returns {GFLOP/s of the first, of the second, second ÷ first as the paired median of
// their speeds}.
std::array<double, 3> time_pair(const std::function<void()>& jit, const std::function<void()>& library, double flops,
                                int repeat, const Sampling& sampling) {
  const int calls = sampling.calibrate(jit);
  std::vector<double> jit_s, lib_s;
  for (int r = 0; r < repeat; ++r) {
    jit_s.push_back(sampling.sample(jit, calls, false));
    lib_s.push_back(sampling.sample(library, calls, false));
  }
  return {flops / median(jit_s) / 1e9, flops / median(lib_s) / 1e9, 1 / paired_median_ratio(lib_s, jit_s)};
}
using CErrorFn = const char* (*)();

}  // namespace

nlohmann::json run_library_benchmark(const std::vector<GemmShape>& shapes, const std::vector<SparseCase>& sparse,
                                     const std::vector<AttentionShape>& attention, const std::vector<int>& threads,
                                     int repeat, const Sampling& sampling, std::ostream& log) {
  namespace fs = std::filesystem;
  const CpuTarget host = CpuTarget::host();
  nlohmann::json manifest{{"name", "benchlib"}, {"kernels", nlohmann::json::array()}};
  nlohmann::json entry{{"name", "matmul"}, {"op", "gemm"}, {"epilogue", "acc"}, {"targets", {host.str()}}};
  for (const auto& s : shapes) entry["shapes"].push_back(fmt::format("{}x{}x{}x{}", s.m, s.n, s.k, s.batch));
  if (!shapes.empty()) manifest["kernels"].push_back(entry);
  if (!sparse.empty()) {
    nlohmann::json spmm{{"name", "spmm"}, {"op", "spmm"}, {"epilogue", "acc"}, {"targets", {host.str()}}},
        sddmm{{"name", "sddmm"}, {"op", "sddmm"}, {"epilogue", "acc * s"}, {"targets", {host.str()}}};
    for (const auto& c : sparse) {
      spmm["shapes"].push_back(fmt::format("1024x{}x1024", c.dense));
      sddmm["shapes"].push_back(fmt::format("1024x1024x{}", c.dense));
    }
    manifest["kernels"].push_back(spmm);
    manifest["kernels"].push_back(sddmm);
  }
  std::map<std::string, nlohmann::json> attention_entries;  // per head dimension and causality
  for (const auto& a : attention) {
    nlohmann::json& e = attention_entries[attention_entry(a)];
    if (e.is_null())
      e = {{"name", attention_entry(a)},
           {"op", "attention"},
           {"head_dim", a.head_dim},
           {"causal", a.causal},
           {"targets", {host.str()}}};
    e["shapes"].push_back(fmt::format("{}x{}x{}x{}", a.seq_q, a.seq_kv, a.heads, a.kv_heads));
  }
  for (const auto& [name, e] : attention_entries) manifest["kernels"].push_back(e);
  const fs::path dir = fs::temp_directory_path() / fmt::format("tessera-bench-library-{}", getpid());
  fs::remove_all(dir);
  const LibraryBuildReport built = build_library(parse_library_manifest(manifest.dump()), dir, {});
  log << fmt::format("library: {} variants built in {:.1f} s ({})\n", built.variants, built.seconds, dir.string());
  void* handle = dlopen((dir / "lib" / "libbenchlib.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw Error(std::string("cannot load the library: ") + dlerror());
  const auto matmul = reinterpret_cast<CGemmFn>(dlsym(handle, "benchlib_matmul"));
  const auto spmm_fn = reinterpret_cast<CSpmmFn>(dlsym(handle, "benchlib_spmm"));
  const auto sddmm_fn = reinterpret_cast<CSddmmFn>(dlsym(handle, "benchlib_sddmm"));
  const auto last_error = reinterpret_cast<CErrorFn>(dlsym(handle, "benchlib_last_error"));
  if ((!shapes.empty() && !matmul) || (!sparse.empty() && (!spmm_fn || !sddmm_fn)) || !last_error)
    throw Error("the library lacks a kernel it was built with");

  nlohmann::json rows = nlohmann::json::array();
  log << fmt::format("{:<36} {:>7} {:>10} {:>10} {:>9}\n", "shape", "threads", "JIT GF/s", "lib GF/s", "lib/JIT");
  for (const auto& s : shapes)
    for (int t : threads) {
      RuntimeOptions options;
      options.threads = t;
      Runtime runtime(options);
      std::vector<float> a(static_cast<std::size_t>(s.batch * s.m * s.k), 0.5f),
          b(static_cast<std::size_t>(s.batch * s.k * s.n), 0.25f), d(static_cast<std::size_t>(s.batch * s.m * s.n));
      GemmArgs args;
      args.a = Tensor::batched(a.data(), s.batch, s.m, s.k, Layout::row_major(), s.k, s.m * s.k);
      args.b = Tensor::batched(b.data(), s.batch, s.k, s.n, Layout::row_major(), s.n, s.k * s.n);
      args.d = Tensor::batched(d.data(), s.batch, s.m, s.n, Layout::row_major(), s.n, s.m * s.n);
      args.set_epilogue("acc");
      const GemmKernel kernel = runtime.compile(runtime.describe(args));
      const PreparedGemm prepared = kernel.prepare(args);
      const CGemmArgs c{s.m,
                        s.n,
                        s.k,
                        s.batch,
                        {a.data(), s.k, 1, s.m * s.k},
                        {b.data(), s.n, 1, s.k * s.n},
                        {nullptr, 0, 0, 0},
                        {d.data(), s.n, 1, s.m * s.n},
                        nullptr,
                        1.0f,
                        0.0f,
                        t};
      // The same product both ways first: they must agree (inputs vary, so a wrong tile would show).
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
      prepared.run();
      const std::vector<float> jit_d = d;
      std::fill(d.begin(), d.end(), -1.0f);
      if (matmul(&c) != 0) throw Error(std::string("benchlib_matmul: ") + last_error());
      const bool agrees = d == jit_d;  // small integers: exact either way
      const std::function<void()> jit = [&] { prepared.run(); };
      const std::function<void()> library = [&] { matmul(&c); };
      const int calls = sampling.calibrate(jit);
      std::vector<double> jit_s, lib_s;
      for (int r = 0; r < repeat; ++r) {
        jit_s.push_back(sampling.sample(jit, calls, false));
        lib_s.push_back(sampling.sample(library, calls, false));
      }
      const double jit_gf = s.flops() / median(jit_s) / 1e9, lib_gf = s.flops() / median(lib_s) / 1e9;
      const double ratio = 1 / paired_median_ratio(lib_s, jit_s);
      log << fmt::format("{:<36} {:>7} {:>10.1f} {:>10.1f} {:>9.3f}{}\n", s.label(), t, jit_gf, lib_gf, ratio,
                         agrees ? "" : "  DISAGREES");
      rows.push_back({{"op", "gemm"},
                      {"shape", s.label()},
                      {"threads", t},
                      {"jit_kernel", kernel.name()},
                      {"jit_gflops", jit_gf},
                      {"library_gflops", lib_gf},
                      {"library_over_jit", ratio},
                      {"agrees", agrees}});
    }

  // SpMM and SDDMM: the JIT's kernel (its runtime's plan made once) against the library's call, which checks the
  // pattern on every call.
  for (const SparseCase& c : sparse) {
    const SparseMatrixData stored = SparseMatrixData::csr(generate_pattern(c.pattern));
    // Small integers for values: every sum is exact, so the two sides agree whatever order they add in (the JIT
    // tiles K where the library does not).
    const std::vector<float> values = small_integers(static_cast<std::size_t>(stored.view().entries), 5);
    SparseMatrix a = stored.view();
    a.values = values.data();
    const std::int64_t m = a.rows, k = a.cols, n = c.dense;
    const std::vector<float> b = small_integers(static_cast<std::size_t>(k * n), 5);
    const std::vector<float> left = small_integers(static_cast<std::size_t>(m * n), 7),
                             right = small_integers(static_cast<std::size_t>(k * n), 3);
    std::vector<float> d(static_cast<std::size_t>(m * n)), out(static_cast<std::size_t>(a.entries));
    for (int t : threads) {
      RuntimeOptions options;
      options.threads = t;
      Runtime runtime(options);
      SpmmArgs args;
      args.a = a;
      args.b = Tensor::matrix(const_cast<float*>(b.data()), k, n);
      args.d = Tensor::matrix(d.data(), m, n);
      args.set_epilogue("acc");
      args.plan = std::make_shared<const SparsePlan>(SparsePlan::inspect(a, t));
      const SpmmKernel kernel = runtime.compile(runtime.describe(args));
      const CSpmmArgs ca{{a.rows, a.cols, a.entries, a.row_offsets, a.col_indices, a.values},
                         n,
                         {b.data(), n, 1, 0},
                         {nullptr, 0, 0, 0},
                         {d.data(), n, 1, 0},
                         nullptr,
                         1.0f,
                         0.0f,
                         t};
      kernel.run(args);
      const std::vector<float> jit_d = d;
      std::fill(d.begin(), d.end(), -1.0f);
      if (spmm_fn(&ca) != 0) throw Error(std::string("benchlib_spmm: ") + last_error());
      const bool spmm_agrees = d == jit_d;
      const auto spmm_t = time_pair([&] { kernel.run(args); }, [&] { spmm_fn(&ca); },
                                    2.0 * static_cast<double>(a.entries) * static_cast<double>(n), repeat, sampling);

      SddmmArgs sargs;
      sargs.pattern = a;
      sargs.a = Tensor::matrix(const_cast<float*>(left.data()), m, n);
      sargs.b = Tensor::matrix(const_cast<float*>(right.data()), k, n);
      sargs.out = Tensor::vector(out.data(), a.entries);
      sargs.set_epilogue("acc * s");
      sargs.plan = args.plan;
      const SddmmKernel skernel = runtime.compile(runtime.describe(sargs));
      const CSddmmArgs cs{{a.rows, a.cols, a.entries, a.row_offsets, a.col_indices, a.values},
                          n,
                          {left.data(), n, 1, 0},
                          {right.data(), n, 1, 0},
                          out.data(),
                          nullptr,
                          1.0f,
                          t};
      skernel.run(sargs);
      const std::vector<float> jit_out = out;
      std::fill(out.begin(), out.end(), -1.0f);
      if (sddmm_fn(&cs) != 0) throw Error(std::string("benchlib_sddmm: ") + last_error());
      const bool sddmm_agrees = out == jit_out;
      const auto sddmm_t = time_pair([&] { skernel.run(sargs); }, [&] { sddmm_fn(&cs); },
                                     2.0 * static_cast<double>(a.entries) * static_cast<double>(n), repeat, sampling);
      for (const auto& [op, jit_name, timing, agrees] : {std::tuple{"spmm", kernel.name(), spmm_t, spmm_agrees},
                                                         std::tuple{"sddmm", skernel.name(), sddmm_t, sddmm_agrees}}) {
        const std::string label = fmt::format("{} {}@{}", op, c.pattern, n);
        log << fmt::format("{:<36} {:>7} {:>10.1f} {:>10.1f} {:>9.3f}{}\n", label, t, timing[0], timing[1], timing[2],
                           agrees ? "" : "  DISAGREES");
        rows.push_back({{"op", op},
                        {"shape", label},
                        {"threads", t},
                        {"jit_kernel", jit_name},
                        {"jit_gflops", timing[0]},
                        {"library_gflops", timing[1]},
                        {"library_over_jit", timing[2]},
                        {"agrees", agrees}});
      }
    }
  }

  // Attention: the JIT's kernel (the runtime's schedule) against the library's call (the same schedule's source).
  for (const AttentionShape& s : attention) {
    const auto fn = reinterpret_cast<CAttentionFn>(dlsym(handle, ("benchlib_" + attention_entry(s)).c_str()));
    if (!fn) throw Error("the library lacks benchlib_" + attention_entry(s));
    const std::int64_t d = s.head_dim;
    const auto size = [&](std::int64_t heads, std::int64_t seq) {
      return static_cast<std::size_t>(s.batch * heads * seq * d);
    };
    const std::vector<float> q = small_integers(size(s.heads, s.seq_q), 5),
                             k = small_integers(size(s.kv_heads, s.seq_kv), 7),
                             v = small_integers(size(s.kv_heads, s.seq_kv), 3);
    std::vector<float> o(size(s.heads, s.seq_q));
    const auto view = [&](const float* at, std::int64_t heads, std::int64_t seq) {
      return Tensor{const_cast<float*>(at), DType::f32, {s.batch, heads, seq, d}, {heads * seq * d, seq * d, d, 1}};
    };
    const auto c_view = [&](const float* at, std::int64_t heads, std::int64_t seq) {
      return CTensor4{at, {heads * seq * d, seq * d, d, 1}};
    };
    for (int t : threads) {
      RuntimeOptions options;
      options.threads = t;
      Runtime runtime(options);
      AttentionArgs args;
      args.q = view(q.data(), s.heads, s.seq_q), args.k = view(k.data(), s.kv_heads, s.seq_kv);
      args.v = view(v.data(), s.kv_heads, s.seq_kv), args.o = view(o.data(), s.heads, s.seq_q);
      args.causal = s.causal;
      args.threads = t;
      const AttentionKernel kernel = runtime.compile(runtime.describe(args));
      const CAttentionArgs c{s.batch,
                             s.heads,
                             s.kv_heads,
                             s.seq_q,
                             s.seq_kv,
                             nullptr,
                             nullptr,
                             c_view(q.data(), s.heads, s.seq_q),
                             c_view(k.data(), s.kv_heads, s.seq_kv),
                             c_view(v.data(), s.kv_heads, s.seq_kv),
                             c_view(o.data(), s.heads, s.seq_q),
                             nullptr,
                             {0, 0, 0},
                             nullptr,
                             0.0f,
                             t};
      kernel.run(args);
      const std::vector<float> jit_o = o;
      std::fill(o.begin(), o.end(), -1.0f);
      if (fn(&c) != 0) throw Error("benchlib_" + attention_entry(s) + ": " + last_error());
      const bool agrees = o == jit_o;  // the same kernel and schedule: the same sums in the same order
      AttentionProblem problem = runtime.describe(args);
      const auto timing = time_pair([&] { kernel.run(args); }, [&] { fn(&c); }, problem.flops(), repeat, sampling);
      const std::string label = "attention " + s.label();
      log << fmt::format("{:<36} {:>7} {:>10.1f} {:>10.1f} {:>9.3f}{}\n", label, t, timing[0], timing[1], timing[2],
                         agrees ? "" : "  DISAGREES");
      rows.push_back({{"op", "attention"},
                      {"shape", label},
                      {"threads", t},
                      {"jit_kernel", kernel.name()},
                      {"jit_gflops", timing[0]},
                      {"library_gflops", timing[1]},
                      {"library_over_jit", timing[2]},
                      {"agrees", agrees}});
    }
  }
  fs::remove_all(dir);
  return rows;
}

}  // namespace tessera::bench
