// `tessera spmm` and `tessera sddmm`: a pattern read from a Matrix Market file or generated, compiled, run, timed and
// optionally verified; `tessera emit spmm|sddmm` prints the kernel's LLVM IR or host assembly.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <iostream>
#include <random>

#include "cli_common.hpp"
#include "commands.hpp"

namespace tessera::cli {

namespace {

struct SparseRequest {
  std::string matrix, gen, write_matrix;
  std::string format = "csr", index = "i32", dtype = "f32", epilogue, target = "cpu", config;
  bool epilogue_given = false;
  std::int64_t dense = 64;  // N for SpMM, K for SDDMM
  float alpha = 1, beta = 0;
  int threads = 0;
};

void add_sparse_options(CLI::App& app, SparseRequest& r, bool spmm) {
  app.add_option("--matrix,--pattern", r.matrix, "a Matrix Market (.mtx) coordinate file");
  app.add_option("--gen", r.gen, "a generated pattern: uniform|powerlaw|banded|blocks:M,K,DENSITY[,SEED]");
  app.add_option(spmm ? "--n" : "--k", r.dense, spmm ? "columns of B and D" : "the dot products' length");
  if (spmm) {
    app.add_option("--format", r.format, "csr or bsr:RxC (block rows x block columns)");
    app.add_option("--beta", r.beta, "beta of the epilogue");
  }
  app.add_option("--index", r.index, "i32 or i64 offsets and indices");
  app.add_option("--dtype", r.dtype, "f32 or bf16 sparse values and dense operands");
  app.add_option("--alpha", r.alpha, "alpha of the epilogue");
  app.add_option("--epilogue", r.epilogue,
                 spmm ? "as for gemm, e.g. 'relu(acc + bias[n])'" : "acc, alpha, s, tensors [m] / [n], e.g. 'acc * s'")
      ->each([&r](const std::string&) { r.epilogue_given = true; });
  app.add_option("--target", r.target, "cpu, cpu:avx512 or cpu:avx2");
  app.add_option("--threads", r.threads, "threads (0: all)");
  app.add_option("--config", r.config,
                 spmm ? "overrides, e.g. nv=4,chains=2,prefetch=8" : "overrides, e.g. cols=8,unroll=2");
  app.add_option("--write-matrix", r.write_matrix, "also write the pattern as a Matrix Market file");
}

struct Pattern {
  CooMatrix coo;
  SparseMatrixData data;
  std::int64_t nonzeros = 0;  // distinct coordinates: what the GFLOP/s count
};

Pattern load_pattern(const SparseRequest& r, bool spmm) {
  if (r.matrix.empty() == r.gen.empty()) throw InvalidArgument("--matrix/--gen", "give exactly one of them");
  if (r.index != "i32" && r.index != "i64") throw InvalidArgument("--index", "must be i32 or i64, got " + r.index);
  if (r.dtype != "f32" && r.dtype != "bf16") throw InvalidArgument("--dtype", "must be f32 or bf16, got " + r.dtype);
  if (r.dense < 0) throw InvalidArgument(spmm ? "--n" : "--k", "must be >= 0");
  if (CudaTarget::is_cuda_text(r.target))
    throw Unavailable("the sparse kernels run on CPU targets; their CUDA kernels are not built yet");
  int br = 1, bc = 1;
  if (r.format != "csr") {
    const auto x = r.format.find('x');
    if (r.format.rfind("bsr:", 0) != 0 || x == std::string::npos)
      throw InvalidArgument("--format", "must be csr or bsr:RxC, got " + r.format);
    const auto parse = [&](std::string_view t) {
      int v = 0;
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (ec != std::errc() || end != t.data() + t.size() || v < 1)
        throw InvalidArgument("--format", "block sides must be positive integers, got " + r.format);
      return v;
    };
    br = parse(std::string_view(r.format).substr(4, x - 4));
    bc = parse(std::string_view(r.format).substr(x + 1));
  }
  Pattern p;
  p.coo = r.matrix.empty() ? generate_pattern(r.gen) : read_matrix_market(r.matrix);
  const int bits = r.index == "i32" ? 32 : 64;
  const DType value = r.dtype == "f32" ? DType::f32 : DType::bf16;
  p.data = br == 1 && bc == 1 ? SparseMatrixData::csr(p.coo, bits, value)
                              : SparseMatrixData::bsr(p.coo, br, bc, bits, value);
  p.nonzeros = br == 1 && bc == 1 ? p.data.view().entries : SparseMatrixData::csr(p.coo).view().entries;
  if (!r.write_matrix.empty()) write_matrix_market(r.write_matrix, SparseMatrixData::csr(p.coo).coo());
  return p;
}

std::vector<std::uint16_t> to_bf16_copy(const std::vector<float>& x) {
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = to_bf16(x[i]);
  return out;
}

std::vector<float> random_floats(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct SparseCommand {
  SparseRequest request;
  bool spmm = true;
  int repeat = 5;
  bool verify = false, json = false;

  int run() const {
    if (repeat < 1) throw InvalidArgument("--repeat", "must be >= 1");
    const Pattern pattern = load_pattern(request, spmm);
    const SparseMatrix a = pattern.data.view();
    Runtime runtime({request.target, 0});
    std::mt19937 rng(42);
    const std::int64_t m = a.rows, n = spmm ? request.dense : a.cols, k = spmm ? a.cols : request.dense;
    const bool bf16 = request.dtype == "bf16";
    std::map<std::string, std::vector<float>> inputs;
    std::map<std::string, Tensor> input_tensors;
    const auto bind_inputs = [&](const Epilogue& e) {
      for (const auto& t : e.tensors()) {
        const std::int64_t rows = t.form == IndexForm::N ? 1 : m, cols = t.form == IndexForm::M ? 1 : n;
        auto& v = inputs[t.name] = random_floats(static_cast<std::size_t>(rows * cols), rng);
        input_tensors[t.name] = t.form == IndexForm::MN ? Tensor::matrix(v.data(), m, n)
                                                        : Tensor::vector(v.data(), t.form == IndexForm::N ? n : m);
      }
    };

    std::vector<float> b, c, d;
    std::vector<std::uint16_t> b16, a16;
    std::string name, hash;
    double compile_ms = 0, ms = 0, min_bytes = 0;
    Comparison cmp;
    nlohmann::json stats;
    if (spmm) {
      SpmmArgs args;
      args.a = a;
      args.threads = request.threads;
      args.alpha = request.alpha;
      args.beta = request.beta;
      if (request.epilogue_given) args.set_epilogue(request.epilogue);
      b = random_floats(static_cast<std::size_t>(k * n), rng);
      args.b = Tensor::matrix(b.data(), k, n);
      if (bf16) {
        b16 = to_bf16_copy(b);
        args.b.data = b16.data(), args.b.dtype = DType::bf16;
      }
      d.assign(static_cast<std::size_t>(m * n), 0.0f);
      args.d = Tensor::matrix(d.data(), m, n);
      if (args.epilogue.reads_c()) {
        c = random_floats(static_cast<std::size_t>(m * n), rng);
        args.c = Tensor::matrix(c.data(), m, n);
      }
      bind_inputs(args.epilogue);
      args.inputs = input_tensors;
      args.plan = std::make_shared<const SparsePlan>(
          SparsePlan::inspect(a, request.threads ? request.threads : runtime.threads()));
      const SpmmProblem problem = runtime.describe(args);
      const SpmmKernel kernel = runtime.compile(problem, runtime.choose_config(problem).with_overrides(request.config));
      GemmReference ref;
      if (verify) ref = reference_spmm(args);
      ms = median_ms(repeat, [&] { kernel.run(args); });
      if (verify) cmp = compare_gemm(ref, args.d);
      name = kernel.name(), hash = kernel.spec().hash().hex(), compile_ms = kernel.compile_ms();
      min_bytes = problem.min_bytes();
      stats = problem.pattern.to_json();
    } else {
      SddmmArgs args;
      args.pattern = a;
      args.threads = request.threads;
      args.alpha = request.alpha;
      if (request.epilogue_given) args.set_epilogue(request.epilogue);
      std::vector<float> av = random_floats(static_cast<std::size_t>(m * k), rng);
      b = random_floats(static_cast<std::size_t>(n * k), rng);
      args.a = Tensor::matrix(av.data(), m, k);
      args.b = Tensor::matrix(b.data(), n, k);
      if (bf16) {
        a16 = to_bf16_copy(av), b16 = to_bf16_copy(b);
        args.a.data = a16.data(), args.a.dtype = DType::bf16;
        args.b.data = b16.data(), args.b.dtype = DType::bf16;
      }
      d.assign(static_cast<std::size_t>(a.entries), 0.0f);
      args.out = Tensor::vector(d.data(), a.entries);
      bind_inputs(args.epilogue);
      args.inputs = input_tensors;
      args.plan = std::make_shared<const SparsePlan>(
          SparsePlan::inspect(a, request.threads ? request.threads : runtime.threads(), "pattern"));
      const SddmmProblem problem = runtime.describe(args);
      const SddmmKernel kernel =
          runtime.compile(problem, runtime.choose_config(problem).with_overrides(request.config));
      SddmmReference ref;
      if (verify) ref = reference_sddmm(args);
      ms = median_ms(repeat, [&] { kernel.run(args); });
      if (verify) cmp = compare_sddmm(ref, args.out);
      name = kernel.name(), hash = kernel.spec().hash().hex(), compile_ms = kernel.compile_ms();
      min_bytes = problem.min_bytes();
      stats = problem.pattern.to_json();
    }
    const bool ok = !verify || cmp.ok();
    const double flops = 2.0 * static_cast<double>(pattern.nonzeros) * static_cast<double>(request.dense);
    const double gflops = ms > 0 ? flops / (ms * 1e6) : 0, gbs = ms > 0 ? min_bytes / (ms * 1e6) : 0;
    if (json) {
      const auto error = [&](double e) { return verify ? nlohmann::json(e) : nlohmann::json(); };
      nlohmann::json j{{"name", name},
                       {"spec_hash", hash},
                       {"m", m},
                       {"k", k},
                       {"n", n},
                       {"nnz", pattern.nonzeros},
                       {"entries", a.entries},
                       {"format", request.format},
                       {"pattern", stats},
                       {"threads", request.threads ? request.threads : runtime.threads()},
                       {"target", runtime.target().str()},
                       {"compile_ms", compile_ms},
                       {"median_ms", ms},
                       {"repeat", repeat},
                       {"gflops", gflops},
                       {"gbytes_per_s", gbs},
                       {"verified", verify},
                       {"max_abs_err", error(cmp.max_abs_err)},
                       {"max_rel_err", error(cmp.max_rel_err)},
                       {"ok", ok}};
      std::cout << j.dump() << "\n";
    } else {
      std::cout << fmt::format(
          "{}\n  {}x{} {} nnz {} ({}), {} = {}  compile {:.1f} ms  run {:.3f} ms  {:.1f} GFLOP/s  "
          "{:.1f} GB/s\n",
          name, a.rows, a.cols, spmm ? "SpMM" : "SDDMM", pattern.nonzeros, request.format, spmm ? "N" : "K",
          request.dense, compile_ms, ms, gflops, gbs);
      if (verify)
        std::cout << fmt::format("  verify: {}  max abs err {:.3g}  max rel err {:.3g}{}\n", ok ? "ok" : "FAILED",
                                 cmp.max_abs_err, cmp.max_rel_err, ok ? "" : "  first: " + cmp.first_mismatch);
    }
    return ok ? kOk : kVerifyFailed;
  }
};

struct EmitSparseCommand {
  SparseRequest request;
  bool spmm = true, assembly = false;

  int run() const {
    Pattern pattern = load_pattern(request, spmm);
    const SparseMatrix a = pattern.data.view();
    Runtime runtime({request.target, 1});
    const std::int64_t m = a.rows, n = spmm ? request.dense : a.cols, k = spmm ? a.cols : request.dense;
    // Only the signature matters here: views of the right shapes and types, never read.
    std::vector<float> b(static_cast<std::size_t>(std::max<std::int64_t>(1, k * n))),
        d(static_cast<std::size_t>(std::max<std::int64_t>(1, m * std::max(n, k)))), c(d.size()), v(d.size());
    const DType dense_type = request.dtype == "bf16" ? DType::bf16 : DType::f32;
    if (spmm) {
      SpmmArgs args;
      args.a = a;
      args.beta = request.beta;
      if (request.epilogue_given) args.set_epilogue(request.epilogue);
      args.b = Tensor::matrix(b.data(), k, n, Layout::row_major(), 0, dense_type);
      args.d = Tensor::matrix(d.data(), m, n);
      if (args.epilogue.reads_c()) args.c = Tensor::matrix(c.data(), m, n);
      for (const auto& t : args.epilogue.tensors())
        args.inputs[t.name] = t.form == IndexForm::MN ? Tensor::matrix(v.data(), m, n)
                                                      : Tensor::vector(v.data(), t.form == IndexForm::N ? n : m);
      const SpmmProblem p = runtime.describe(args);
      const CpuSpmmSpec spec{p.signature, runtime.choose_config(p).with_overrides(request.config), runtime.target()};
      std::cout << (assembly ? spmm_host_assembly(spec) : spmm_llvm_ir(spec));
      return kOk;
    }
    SddmmArgs args;
    args.pattern = a;
    if (request.epilogue_given) args.set_epilogue(request.epilogue);
    args.a = Tensor::matrix(d.data(), m, k);
    args.b = Tensor::matrix(b.data(), n, k);
    std::vector<float> out(static_cast<std::size_t>(std::max<std::int64_t>(1, a.entries)));
    args.out = Tensor::vector(out.data(), a.entries);
    for (const auto& t : args.epilogue.tensors())
      args.inputs[t.name] = Tensor::vector(v.data(), t.form == IndexForm::N ? n : m);
    const SddmmProblem p = runtime.describe(args);
    const CpuSddmmSpec spec{p.signature, runtime.choose_config(p).with_overrides(request.config), runtime.target()};
    std::cout << (assembly ? sddmm_host_assembly(spec) : sddmm_llvm_ir(spec));
    return kOk;
  }
};

}  // namespace

void add_sparse_commands(CLI::App& app, int& result) {
  for (const bool spmm : {true, false}) {
    auto cmd = std::make_shared<SparseCommand>();
    cmd->spmm = spmm;
    CLI::App* sub = app.add_subcommand(spmm ? "spmm" : "sddmm",
                                       spmm ? "compile and run D = epilogue(A·B), A sparse (CSR or BSR)"
                                            : "compile and run out[p] = epilogue(A[i,:]·B[j,:]) at a sparse pattern");
    add_sparse_options(*sub, cmd->request, spmm);
    sub->add_option("--repeat", cmd->repeat, "timed repetitions (median reported)");
    sub->add_flag("--verify", cmd->verify, "compare with the double-precision reference; exit 1 if out of tolerance");
    sub->add_flag("--json", cmd->json, "print one JSON object");
    sub->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });
  }
}

void add_emit_sparse_commands(CLI::App& emit, int& result) {
  for (const bool spmm : {true, false}) {
    auto cmd = std::make_shared<EmitSparseCommand>();
    cmd->spmm = spmm;
    CLI::App* sub = emit.add_subcommand(spmm ? "spmm" : "sddmm", "the sparse kernel for these arguments");
    add_sparse_options(*sub, cmd->request, spmm);
    sub->add_flag("--asm", cmd->assembly, "print host assembly instead of LLVM IR");
    sub->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });
  }
}

}  // namespace tessera::cli
