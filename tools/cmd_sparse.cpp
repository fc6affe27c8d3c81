// `tessera spmm` and `tessera sddmm`: a pattern read from a Matrix Market file or generated, compiled, run, timed and
// optionally verified; `tessera emit spmm|sddmm` prints the kernel's LLVM IR or host assembly.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <iostream>
#include <memory>
#include <random>

#include "cli_common.hpp"
#include "commands.hpp"
#include "generator/cost/sparse_cost.hpp"
#include "generator/cuda/sparse_source.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/sparse/sparse_json.hpp"
#include "tessera/tuner.hpp"

namespace tessera::cli {

namespace {

struct SparseRequest {
  std::string matrix, gen, write_matrix;
  std::string format = "auto", index = "i32", dtype = "f32", epilogue, target = "cpu", config;
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
    app.add_option("--format", r.format,
                   "auto (BSR where the entries cluster into square blocks at least half full, else CSR), csr or "
                   "bsr:RxC (block rows x block columns)");
    app.add_option("--beta", r.beta, "beta of the epilogue");
  }
  app.add_option("--index", r.index, "i32 or i64 offsets and indices");
  app.add_option("--dtype", r.dtype, "f32 or bf16 (f16 on CUDA targets): sparse values and dense operands");
  app.add_option("--alpha", r.alpha, "alpha of the epilogue");
  app.add_option("--epilogue", r.epilogue,
                 spmm ? "as for gemm, e.g. 'relu(acc + bias[n])'" : "acc, alpha, s, tensors [m] / [n], e.g. 'acc * s'")
      ->each([&r](const std::string&) { r.epilogue_given = true; });
  app.add_option("--target", r.target, "cpu, cpu:avx512, cpu:avx2, cuda[:sm_XX] or cuda-emu:sm_XX (CSR)");
  app.add_option("--threads", r.threads, "threads (0: all)");
  app.add_option("--config", r.config,
                 spmm ? "overrides, e.g. nv=4,chains=2,prefetch=8" : "overrides, e.g. cols=8,unroll=2");
  app.add_option("--write-matrix", r.write_matrix, "also write the pattern as a Matrix Market file");
}

struct Pattern {
  CooMatrix coo;
  SparseMatrixData data;
  std::int64_t nonzeros = 0;  // distinct coordinates: what the GFLOP/s count
  std::string format;         // as stored: csr or bsr:RxC
};

Pattern load_pattern(const SparseRequest& r, bool spmm) {
  if (r.matrix.empty() == r.gen.empty()) throw InvalidArgument("--matrix/--gen", "give exactly one of them");
  if (r.index != "i32" && r.index != "i64") throw InvalidArgument("--index", "must be i32 or i64, got " + r.index);
  const bool cuda = CudaTarget::is_cuda_text(r.target);
  if (r.dtype != "f32" && r.dtype != "bf16" && !(cuda && r.dtype == "f16"))
    throw InvalidArgument("--dtype", "must be f32 or bf16 (f16 on CUDA targets), got " + r.dtype);
  if (r.dense < 0) throw InvalidArgument(spmm ? "--n" : "--k", "must be >= 0");
  if (cuda && r.format != "csr" && r.format != "auto" && r.format != "bsr:16x16")
    throw InvalidArgument("--format", "the CUDA kernels take csr or bsr:16x16 (f16 or bf16, on mma.sync)");
  if (cuda && !r.config.empty()) throw InvalidArgument("--config", "is for CPU targets");
  int br = 1, bc = 1;
  if (r.format != "csr" && r.format != "auto") {
    const auto x = r.format.find('x');
    if (r.format.rfind("bsr:", 0) != 0 || x == std::string::npos)
      throw InvalidArgument("--format", "must be auto, csr or bsr:RxC, got " + r.format);
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
  const DType value = *parse_dtype(r.dtype);
  if (r.format == "auto" && spmm && !cuda) {
    // The inspector's choice, as Runtime::spmm makes it: square blocks where the entries cluster.
    const SparseMatrixData csr = SparseMatrixData::csr(p.coo, bits, value);
    br = bc = square_block_for(SparsePlan::inspect(csr.view(), 1).stats(), r.dense,
                               cpu_spmm_max_block_rows(CpuTarget::parse(r.target)));
  }
  // As Runtime::spmm runs them: blocks taller than the target's register tile, split into blocks of fewer rows (the
  // JSON's format names what ran).
  if (spmm && !cuda) br = cpu_spmm_block_rows_for(br, CpuTarget::parse(r.target));
  // The dense operands this command allocates: M x N and K x N (SpMM), M x K and N x K (SDDMM).
  const double limit = double(std::int64_t{1} << 31);
  if (double(std::max(p.coo.rows, p.coo.cols)) * double(r.dense) > limit)
    throw InvalidArgument(spmm ? "--n" : "--k", "this command allocates at most 2^31 elements per dense operand");
  p.format = br == 1 && bc == 1 ? "csr" : fmt::format("bsr:{}x{}", br, bc);
  p.data = br == 1 && bc == 1 ? SparseMatrixData::csr(p.coo, bits, value)
                              : SparseMatrixData::bsr(p.coo, br, bc, bits, value);
  p.nonzeros = br == 1 && bc == 1 ? p.data.view().entries : SparseMatrixData::csr(p.coo).view().entries;
  if (!r.write_matrix.empty()) write_matrix_market(r.write_matrix, SparseMatrixData::csr(p.coo).coo());
  return p;
}

// 16-bit copies of f32 values, and the f32 values rounded the same way (what the reference multiplies).
std::vector<std::uint16_t> to_16bit_copy(std::vector<float>& x, DType dtype) {
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    out[i] = dtype == DType::bf16 ? to_bf16(x[i]) : to_f16(x[i]);
    x[i] = dtype == DType::bf16 ? from_bf16(out[i]) : from_f16(out[i]);
  }
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
    if (CudaTarget::is_cuda_text(request.target)) return run_cuda(pattern);
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
        b16 = to_16bit_copy(b, DType::bf16);
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
      stats = to_json(problem.pattern);
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
        a16 = to_16bit_copy(av, DType::bf16), b16 = to_16bit_copy(b, DType::bf16);
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
      stats = to_json(problem.pattern);
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
                       {"format", pattern.format},
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
          name, a.rows, a.cols, spmm ? "SpMM" : "SDDMM", pattern.nonzeros, pattern.format, spmm ? "N" : "K",
          request.dense, compile_ms, ms, gflops, gbs);
      if (verify)
        std::cout << fmt::format("  verify: {}  max abs err {:.3g}  max rel err {:.3g}{}\n", ok ? "ok" : "FAILED",
                                 cmp.max_abs_err, cmp.max_rel_err, ok ? "" : "  first: " + cmp.first_mismatch);
    }
    return ok ? kOk : kVerifyFailed;
  }

  // On a GPU (or in the emulator): the pattern and the operands mirrored to device memory, the plan made from the
  // host arrays, timed with CUDA events (wall time in the emulator), the output fetched back and verified.
  int run_cuda(const Pattern& pattern) const {
    CudaRuntime runtime(request.target);  // no driver or no device: Unavailable, with the reason
    const SparseMatrix host = pattern.data.view();
    const DType dtype = *parse_dtype(request.dtype);
    const std::int64_t m = host.rows, n = spmm ? request.dense : host.cols, k = spmm ? host.cols : request.dense;
    std::mt19937 rng(42);
    DeviceMirror device(runtime);
    SparseMatrix dev = host;
    const auto index = static_cast<std::size_t>(host.index_bits / 8);
    Tensor array;
    device.add(array, host.row_offsets, static_cast<std::size_t>(host.block_row_count() + 1) * index);
    dev.row_offsets = array.data;
    device.add(array, host.col_indices, static_cast<std::size_t>(host.entries) * index);
    dev.col_indices = array.data;
    device.add(array, host.values,
               static_cast<std::size_t>(host.entries * host.block_rows * host.block_cols * dtype_bytes(host.value)));
    dev.values = array.data;
    const auto plan = std::make_shared<const SparsePlan>(SparsePlan::inspect(host, 1, spmm ? "a" : "pattern"));
    const auto operand = [&](std::int64_t rows, std::int64_t cols, std::vector<float>& values,
                             std::vector<std::uint16_t>& bits) {
      values = random_floats(static_cast<std::size_t>(rows * cols), rng);
      if (dtype == DType::f32) return Tensor::matrix(values.data(), rows, cols);
      bits = to_16bit_copy(values, dtype);
      return Tensor::matrix(bits.data(), rows, cols, Layout::row_major(), 0, dtype);
    };
    std::vector<float> av, bv, out;
    std::vector<std::uint16_t> a16, b16;
    double ms = 0;
    Comparison cmp;
    if (spmm) {
      SpmmArgs args;
      args.a = host;
      args.alpha = request.alpha, args.beta = request.beta;
      if (request.epilogue_given) args.set_epilogue(request.epilogue);
      const bool c_read = args.epilogue.reads_c() && !(args.beta == 0 && args.epilogue.c_scaled_by_beta());
      if (!args.epilogue.tensors().empty() || c_read)
        throw InvalidArgument("--epilogue", "the CUDA command runs epilogues of acc and alpha (the API takes more)");
      args.b = operand(k, n, bv, b16);
      out.assign(static_cast<std::size_t>(m * n), 0.0f);
      args.d = Tensor::matrix(out.data(), m, n);
      GemmReference ref;
      if (verify) {
        Tensor b32 = Tensor::matrix(bv.data(), k, n);
        SpmmArgs host_args = args;
        host_args.b = b32;
        ref = reference_spmm(host_args);
      }
      SpmmArgs device_args = args;
      device_args.a = dev;
      device_args.plan = plan;
      device.add(device_args.b, args.b.data, static_cast<std::size_t>(k * n * dtype_bytes(dtype)));
      const std::size_t d_copy = device.add(device_args.d, out);
      ms = runtime.spmm_ms(device_args, repeat);
      runtime.synchronize();
      device.fetch(d_copy, out);
      if (verify) cmp = compare_gemm(ref, args.d);
    } else {
      SddmmArgs args;
      args.pattern = host;
      args.alpha = request.alpha;
      if (request.epilogue_given) args.set_epilogue(request.epilogue);
      if (!args.epilogue.tensors().empty())
        throw InvalidArgument("--epilogue", "the CUDA command runs epilogues of acc, alpha and s (the API takes more)");
      args.a = operand(m, k, av, a16);
      args.b = operand(n, k, bv, b16);
      out.assign(static_cast<std::size_t>(host.entries), 0.0f);
      args.out = Tensor::vector(out.data(), host.entries);
      SddmmReference ref;
      if (verify) {
        SddmmArgs host_args = args;
        host_args.a = Tensor::matrix(av.data(), m, k);
        host_args.b = Tensor::matrix(bv.data(), n, k);
        ref = reference_sddmm(host_args);
      }
      SddmmArgs device_args = args;
      device_args.pattern = dev;
      device_args.plan = plan;
      device.add(device_args.a, args.a.data, static_cast<std::size_t>(m * k * dtype_bytes(dtype)));
      device.add(device_args.b, args.b.data, static_cast<std::size_t>(n * k * dtype_bytes(dtype)));
      const std::size_t out_copy = device.add(device_args.out, out);
      ms = runtime.sddmm_ms(device_args, repeat);
      runtime.synchronize();
      device.fetch(out_copy, out);
      if (verify) cmp = compare_sddmm(ref, args.out);
    }
    const bool ok = !verify || cmp.ok();
    const double gflops =
        ms > 0 ? 2.0 * static_cast<double>(pattern.nonzeros) * static_cast<double>(request.dense) / (ms * 1e6) : 0;
    if (json) {
      nlohmann::json j{{"target", request.target},
                       {"device", runtime.device_name()},
                       {"m", m},
                       {"k", k},
                       {"n", n},
                       {"nnz", pattern.nonzeros},
                       {"format", pattern.format},
                       {"median_ms", ms},
                       {"gflops", gflops},
                       {"verified", verify},
                       {"ok", ok}};
      if (verify) j["max_abs_err"] = cmp.max_abs_err, j["max_rel_err"] = cmp.max_rel_err;
      std::cout << j.dump() << "\n";
    } else {
      std::cout << fmt::format("{} on {}\n  {}x{} nnz {}, {} = {}  run {:.3f} ms  {:.1f} GFLOP/s\n",
                               spmm ? "SpMM" : "SDDMM", runtime.device_name(), m, spmm ? k : n, pattern.nonzeros,
                               spmm ? "N" : "K", request.dense, ms, gflops);
      if (verify)
        std::cout << fmt::format("  verify: {}  max abs err {:.3g}{}\n", ok ? "ok" : "FAILED", cmp.max_abs_err,
                                 ok ? "" : "  first: " + cmp.first_mismatch);
    }
    return ok ? kOk : kVerifyFailed;
  }
};

struct EmitSparseCommand {
  SparseRequest request;
  bool spmm = true, assembly = false, ptx = false, resources = false, json = false;

  // CUDA: the source, or NVRTC's PTX, or the ptxas resources (text or JSON), without a GPU.
  int run_cuda(const SparseMatrix& a) const {
    if (assembly) throw InvalidArgument("--asm", "is for CPU targets (use --ptx)");
    const CudaTarget target = CudaTarget::parse(request.target);
    const DType dtype = *parse_dtype(request.dtype);
    std::string name;
    CudaCode code;
    const bool compile = ptx || resources || json;
    if (spmm) {
      SpmmSignature s;
      s.a = a.signature();
      s.dense.a = {a.value, Layout::row_major()};
      s.dense.b = {dtype, Layout::row_major()};
      s.dense.c = {DType::f32, Layout::zero()};
      s.dense.d = {DType::f32, Layout::row_major()};
      s.dense.epilogue = request.epilogue_given ? Epilogue::parse(request.epilogue) : Epilogue::parse("alpha*acc");
      if (!s.dense.epilogue.tensors().empty() || s.dense.epilogue.reads_c())
        throw InvalidArgument("--epilogue", "the command emits epilogues of acc and alpha (the API takes more)");
      SpmmProblem problem;
      problem.m = a.rows, problem.k = a.cols, problem.n = request.dense, problem.signature = s;
      const CudaSpmmSpec spec{s, cuda_spmm_default(problem), target};
      if (!compile) {
        std::cout << emit_cuda_spmm(spec).code;
        return kOk;
      }
      code = generate_cuda_spmm(spec, resources || json);
    } else {
      SddmmSignature s;
      s.pattern = a.signature();
      s.dense.a = {dtype, Layout::row_major()};
      s.dense.b = {dtype, Layout::col_major()};
      s.dense.c = {DType::f32, Layout::zero()};
      s.dense.d = {DType::f32, Layout::row_major()};
      s.dense.epilogue = Epilogue::parse_sampled(request.epilogue_given ? request.epilogue : "acc");
      if (!s.dense.epilogue.tensors().empty())
        throw InvalidArgument("--epilogue", "the command emits epilogues of acc, alpha and s (the API takes more)");
      SddmmProblem problem;
      problem.m = a.rows, problem.n = a.cols, problem.k = request.dense, problem.signature = s;
      const CudaSddmmSpec spec{s, cuda_sddmm_default(problem), target};
      if (!compile) {
        std::cout << emit_cuda_sddmm(spec).code;
        return kOk;
      }
      code = generate_cuda_sddmm(spec, resources || json);
    }
    const nlohmann::json r = nlohmann::json::parse(code.report);
    if (json)
      std::cout << r.dump() << "\n";
    else if (ptx)
      std::cout << code.ptx;
    else
      std::cout << fmt::format(
          "{}\n  {} threads, {} registers, {} bytes shared, spills {} / {} bytes (store / load), "
          "{} local accesses\n",
          r["name"].get<std::string>(), r["threads"].get<int>(), r["registers"].get<int>(),
          r["shared_bytes"].get<std::int64_t>(), r["spill_store_bytes"].get<int>(), r["spill_load_bytes"].get<int>(),
          r["local_access_count"].get<int>());
    return kOk;
  }

  int run() const {
    Pattern pattern = load_pattern(request, spmm);
    const SparseMatrix a = pattern.data.view();
    if (CudaTarget::is_cuda_text(request.target)) return run_cuda(a);
    if (ptx || resources || json) throw InvalidArgument("--ptx/--resources/--json", "are for CUDA targets");
    Runtime runtime({request.target, 1});
    const std::int64_t m = a.rows, n = spmm ? request.dense : a.cols, k = spmm ? a.cols : request.dense;
    // Only the signature matters here: views of the right shapes and types, never read (nor written: the pages of
    // an untouched allocation are not mapped). D is M×N (SpMM), A M×K (SDDMM); sizing each as the larger of the two
    // asked 40 GB of 100000×100000 with N = 64.
    const auto buffer = [](std::int64_t elements) {
      return std::unique_ptr<float[]>(new float[static_cast<std::size_t>(std::max<std::int64_t>(1, elements))]);
    };
    const std::int64_t d_elements = spmm ? m * n : m * k;
    const auto b = buffer(k * n), d = buffer(d_elements), c = buffer(d_elements),
               v = buffer(std::max({d_elements, m, n}));
    const DType dense_type = request.dtype == "bf16" ? DType::bf16 : DType::f32;
    if (spmm) {
      SpmmArgs args;
      args.a = a;
      args.beta = request.beta;
      if (request.epilogue_given) args.set_epilogue(request.epilogue);
      args.b = Tensor::matrix(b.get(), k, n, Layout::row_major(), 0, dense_type);
      args.d = Tensor::matrix(d.get(), m, n);
      if (args.epilogue.reads_c()) args.c = Tensor::matrix(c.get(), m, n);
      for (const auto& t : args.epilogue.tensors())
        args.inputs[t.name] = t.form == IndexForm::MN ? Tensor::matrix(v.get(), m, n)
                                                      : Tensor::vector(v.get(), t.form == IndexForm::N ? n : m);
      const SpmmProblem p = runtime.describe(args);
      const CpuSpmmSpec spec{p.signature, runtime.choose_config(p).with_overrides(request.config), runtime.target()};
      std::cout << (assembly ? spmm_host_assembly(spec) : spmm_llvm_ir(spec));
      return kOk;
    }
    SddmmArgs args;
    args.pattern = a;
    if (request.epilogue_given) args.set_epilogue(request.epilogue);
    args.a = Tensor::matrix(d.get(), m, k);
    args.b = Tensor::matrix(b.get(), n, k);
    std::vector<float> out(static_cast<std::size_t>(std::max<std::int64_t>(1, a.entries)));
    args.out = Tensor::vector(out.data(), a.entries);
    for (const auto& t : args.epilogue.tensors())
      args.inputs[t.name] = Tensor::vector(v.get(), t.form == IndexForm::N ? n : m);
    const SddmmProblem p = runtime.describe(args);
    const CpuSddmmSpec spec{p.signature, runtime.choose_config(p).with_overrides(request.config), runtime.target()};
    std::cout << (assembly ? sddmm_host_assembly(spec) : sddmm_llvm_ir(spec));
    return kOk;
  }
};

struct TuneSparseCommand {
  SparseRequest request;
  bool spmm = true;
  TuneOptions options;
  std::string records_path, family = "cli";
  bool json = false;

  int run() {
    if (CudaTarget::is_cuda_text(request.target))
      throw InvalidArgument("--target", "tune spmm|sddmm is for CPU targets");
    if (options.top_k < 1) throw InvalidArgument("--top-k", "must be >= 1");
    if (options.samples < 1) throw InvalidArgument("--samples", "must be >= 1");
    const Pattern pattern = load_pattern(request, spmm);
    const SparseMatrix a = pattern.data.view();
    Runtime runtime({request.target, request.threads});
    const auto records = open_records(records_path);
    const double flops = 2.0 * static_cast<double>(pattern.nonzeros) * static_cast<double>(request.dense);
    std::vector<float> b, d(1), out(static_cast<std::size_t>(std::max<std::int64_t>(1, a.entries)));
    const DType dense = request.dtype == "bf16" ? DType::bf16 : DType::f32;
    if (spmm) {
      SpmmArgs args;
      args.a = a;
      if (request.epilogue_given) args.set_epilogue(request.epilogue);
      if (args.epilogue.reads_c() && !(request.beta == 0 && args.epilogue.c_scaled_by_beta()))
        throw InvalidArgument("--epilogue", "tune spmm times epilogues without c");
      if (!args.epilogue.tensors().empty())
        throw InvalidArgument("--epilogue", "tune spmm times epilogues without tensors");
      b.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, a.cols * request.dense)));
      d.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, a.rows * request.dense)));
      args.b = Tensor::matrix(b.data(), a.cols, request.dense, Layout::row_major(), 0, dense);
      args.d = Tensor::matrix(d.data(), a.rows, request.dense);
      args.threads = request.threads;
      SpmmProblem problem = runtime.describe(args);
      return print_tune_result(tune_spmm(runtime, problem, a, options, records.get(), family), flops, json);
    }
    SddmmArgs args;
    args.pattern = a;
    if (request.epilogue_given) args.set_epilogue(request.epilogue);
    if (!args.epilogue.tensors().empty())
      throw InvalidArgument("--epilogue", "tune sddmm times epilogues without tensors");
    b.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, std::max(a.rows, a.cols) * request.dense)));
    args.a = Tensor::matrix(b.data(), a.rows, request.dense);
    args.b = Tensor::matrix(b.data(), a.cols, request.dense);
    args.out = Tensor::vector(out.data(), a.entries);
    args.threads = request.threads;
    return print_tune_result(tune_sddmm(runtime, runtime.describe(args), a, options, records.get(), family), flops,
                             json);
  }
};

}  // namespace

void add_tune_sparse_commands(CLI::App& tune, int& result) {
  for (const bool spmm : {true, false}) {
    auto cmd = std::make_shared<TuneSparseCommand>();
    cmd->spmm = spmm;
    CLI::App* sub = tune.add_subcommand(spmm ? "spmm" : "sddmm", "time the variants of one sparse problem");
    add_sparse_options(*sub, cmd->request, spmm);
    sub->add_option("--top-k", cmd->options.top_k, "variants timed, best-ranked first");
    sub->add_flag("--exhaustive", cmd->options.exhaustive, "time every variant of the space");
    sub->add_option("--samples", cmd->options.samples, "interleaved rounds (median reported)");
    add_records_options(*sub, cmd->records_path, cmd->family);
    sub->add_flag("--json", cmd->json, "print one JSON object");
    sub->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });
  }
}

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
    sub->add_flag("--asm", cmd->assembly, "CPU: print host assembly instead of LLVM IR");
    sub->add_flag("--ptx", cmd->ptx, "CUDA: print the PTX NVRTC produces instead of the CUDA source");
    sub->add_flag("--resources", cmd->resources, "CUDA: compile to CUBIN and print registers, shared memory, spills");
    sub->add_flag("--json", cmd->json, "CUDA: compile to CUBIN and print the resource report as one JSON object");
    sub->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });
  }
}

}  // namespace tessera::cli
