#include "cli_common.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>

#include "generator/core/arith.hpp"

namespace tessera::cli {

namespace {
Layout layout_option(const std::string& text, const std::string& option) {
  auto layout = Layout::parse(text);
  if (!layout || (layout->kind() != LayoutKind::RowMajor && layout->kind() != LayoutKind::ColMajor))
    throw InvalidArgument(option, "must be row or col, got '" + text + "'");
  return *layout;
}

void fill(std::vector<float>& v, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : v) x = dist(rng);
}

std::size_t count(std::int64_t a, std::int64_t b, std::int64_t c = 1) {
  return static_cast<std::size_t>(std::max<std::int64_t>(0, a) * std::max<std::int64_t>(0, b) *
                                  std::max<std::int64_t>(0, c));
}
}  // namespace

void add_gemm_options(CLI::App& app, GemmRequest& r) {
  app.add_option("M", r.m, "rows of A and D")->required();
  app.add_option("N", r.n, "columns of B and D")->required();
  app.add_option("K", r.k, "columns of A, rows of B")->required();
  app.add_option("--batch", r.batch, "number of matrices in the batch");
  app.add_option("--layout-a", r.layout_a, "row or col");
  app.add_option("--layout-b", r.layout_b, "row or col");
  app.add_option("--layout-c", r.layout_c, "row or col (C and D)");
  app.add_option("--alpha", r.alpha, "scalar alpha");
  app.add_option("--beta", r.beta, "scalar beta");
  app.add_option("--epilogue", r.epilogue, "e.g. 'gelu(alpha*acc + bias[n])' (default alpha*acc + beta*c)")
      ->each([&r](const std::string&) { r.epilogue_given = true; });
  app.add_option("--threads", r.threads, "threads to run on (0: all)");
  app.add_option("--target", r.target, "cpu, cpu:avx512, cpu:avx2, cuda:sm_80/86/89/90/90a");
  app.add_option("--ir-opt", r.ir_opt_level, "LLVM IR pipeline before the backend: 0, 2 or 3");
  app.add_option("--out-dtype", r.out_dtype, "element type of D (CPU): f32, bf16, or u8 / i8 (rounded, saturated)");
  app.add_option("--dtype", r.dtype,
                 "element type of A and B: f32, bf16, i8 (u8 A, i8 B, i32 sums) or s8 (i8 A and B; AMX) (CPU); f32, "
                 "tf32, f16, bf16 (CUDA)");
  app.add_option("--config", r.config,
                 "override the default config: mr=8,nr=32,kc=256,mc=128,nc=512,k_unroll=4,"
                 "pack_a=0|1,pack_b=0|1");
}

GemmBuffers make_gemm_buffers(const GemmRequest& r, std::uint32_t seed) {
  if (r.m < 0 || r.n < 0 || r.k < 0) throw InvalidArgument("M/N/K", "must be >= 0");
  if (r.batch < 0) throw InvalidArgument("--batch", "must be >= 0");
  if (r.threads < 0) throw InvalidArgument("--threads", "must be >= 0");
  // In double: extents near 2^63 would overflow (undefined) an integer product and slip past the limit.
  const double limit = double(std::int64_t{1} << 31), m = double(r.m), n = double(r.n), k = double(r.k);
  if (m * k > limit || k * n > limit || m * n > limit || double(r.batch) * m * std::max(n, k) > limit)
    throw InvalidArgument("M/N/K", "this command allocates at most 2^31 elements per operand");
  const Layout la = layout_option(r.layout_a, "--layout-a");
  const Layout lb = layout_option(r.layout_b, "--layout-b");
  const Layout lc = layout_option(r.layout_c, "--layout-c");
  GemmBuffers buf;
  GemmArgs& g = buf.args;
  if (r.epilogue_given) g.epilogue = Epilogue::parse(r.epilogue);
  g.alpha = r.alpha;
  g.beta = r.beta;
  g.threads = r.threads;
  std::mt19937 rng(seed);
  const bool batched = r.batch != 1;
  const auto operand = [&](std::vector<float>& v, std::int64_t rows, std::int64_t cols, Layout l) {
    v.resize(std::max<std::size_t>(1, count(r.batch, rows, cols)));
    fill(v, rng);
    return batched ? Tensor::batched(v.data(), r.batch, rows, cols, l) : Tensor::matrix(v.data(), rows, cols, l);
  };
  g.a = operand(buf.a, r.m, r.k, la);
  g.b = operand(buf.b, r.k, r.n, lb);
  if (r.dtype == "bf16" || r.dtype == "f16") {
    // The same random values rounded to 16 bits, viewed with the same shapes and strides.
    const bool bf16 = r.dtype == "bf16";
    const auto narrow = [bf16](const std::vector<float>& v, std::vector<std::uint16_t>& out, Tensor& t) {
      out.resize(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) out[i] = bf16 ? to_bf16(v[i]) : to_f16(v[i]);
      t.data = out.data();
      t.dtype = bf16 ? DType::bf16 : DType::f16;
    };
    narrow(buf.a, buf.a16, g.a);
    narrow(buf.b, buf.b16, g.b);
  } else if (r.dtype == "tf32") {
    g.a.dtype = g.b.dtype = DType::tf32;  // f32 in memory, tf32 math
  } else if (r.dtype == "i8" || r.dtype == "s8") {
    // Quantised operands as oneDNN's int8 matmul takes them, every value: u8 A (activations) and i8 B (weights);
    // s8: i8 A too (AMX tiles).
    std::uniform_int_distribution<int> any_byte(0, 255);
    buf.a8.resize(buf.a.size());
    buf.b8.resize(buf.b.size());
    for (auto& x : buf.a8) x = static_cast<std::uint8_t>(any_byte(rng));
    for (auto& x : buf.b8) x = static_cast<std::int8_t>(any_byte(rng) - 128);
    g.a.data = buf.a8.data(), g.a.dtype = r.dtype == "s8" ? DType::i8 : DType::u8;
    g.b.data = buf.b8.data(), g.b.dtype = DType::i8;
  } else if (r.dtype != "f32") {
    throw InvalidArgument("--dtype", "must be f32, bf16, i8, s8, f16 or tf32, got '" + r.dtype + "'");
  }
  g.c = operand(buf.c, r.m, r.n, lc);
  g.d = operand(buf.d, r.m, r.n, lc);
  if (r.out_dtype != "f32") {
    const auto out = parse_dtype(r.out_dtype);
    if (!out || (*out != DType::bf16 && *out != DType::u8 && *out != DType::i8))
      throw InvalidArgument("--out-dtype", "must be f32, bf16, u8 or i8, got '" + r.out_dtype + "'");
    buf.d_narrow.assign(buf.d.size(), 0);  // as many 16-bit slots as D has floats: room for either width
    g.d.data = buf.d_narrow.data();
    g.d.dtype = *out;
  }
  for (const auto& t : g.epilogue.tensors()) {
    auto& v = buf.inputs[t.name];
    switch (t.form) {
      case IndexForm::N:
        v.resize(std::max<std::size_t>(1, count(r.n, 1)));
        fill(v, rng);
        g.inputs[t.name] = Tensor::vector(v.data(), r.n);
        break;
      case IndexForm::M:
        v.resize(std::max<std::size_t>(1, count(r.m, 1)));
        fill(v, rng);
        g.inputs[t.name] = Tensor::vector(v.data(), r.m);
        break;
      case IndexForm::MN:
        g.inputs[t.name] = operand(v, r.m, r.n, Layout::row_major());
        break;
    }
  }
  return buf;
}

GemmProblem cuda_problem(const GemmRequest& r) {
  if (r.m < 0 || r.n < 0 || r.k < 0) throw InvalidArgument("M/N/K", "must be >= 0");
  if (r.batch < 0) throw InvalidArgument("--batch", "must be >= 0");
  const auto dtype = parse_dtype(r.dtype);
  if (!dtype || (*dtype != DType::f32 && *dtype != DType::f16 && *dtype != DType::bf16 && *dtype != DType::tf32))
    throw InvalidArgument("--dtype", "must be f32, tf32, f16 or bf16 on CUDA, got '" + r.dtype + "'");
  GemmProblem p;
  p.m = r.m, p.n = r.n, p.k = r.k, p.batch = r.batch;
  GemmSignature& s = p.signature;
  if (r.epilogue_given) s.epilogue = Epilogue::parse(r.epilogue);
  s.a = {*dtype, layout_option(r.layout_a, "--layout-a")};
  s.b = {*dtype, layout_option(r.layout_b, "--layout-b")};
  s.d = {DType::f32, layout_option(r.layout_c, "--layout-c")};
  // As describe_gemm decides for host buffers: C is not read when beta = 0 only scales it.
  const bool c_read = s.epilogue.reads_c() && !(r.beta == 0 && s.epilogue.c_scaled_by_beta());
  s.c = c_read ? s.d : OperandSignature{DType::f32, Layout::zero()};
  for (const auto& t : s.epilogue.tensors())
    s.inputs.push_back(
        {t.name, t.form, {DType::f32, t.form == IndexForm::M ? Layout::col_major() : Layout::row_major()}});
  s.check();
  return p;
}

GemmRun run_gemm(Runtime& runtime, const GemmRequest& request, int repeat, bool verify) {
  GemmBuffers buffers = make_gemm_buffers(request);
  const GemmArgs& args = buffers.args;
  GemmRun run;
  run.problem = runtime.describe(args);
  // What the runtime compiles for these arguments (its cost model's choice), or that with the asked overrides; a
  // cache hit is timed on the same path (for the runtime's choice, the one Runtime::gemm takes).
  const bool overridden = !request.config.empty();
  const CpuGemmConfig config = overridden ? CpuGemmConfig::overridden(runtime.choose_config(run.problem), run.problem,
                                                                      runtime.target(), request.config)
                                          : CpuGemmConfig{};
  const auto obtain = [&] { return overridden ? runtime.compile(run.problem, config) : runtime.compile(run.problem); };
  const GemmKernel kernel = obtain();
  run.spec = kernel.spec();
  run.compile_ms = kernel.compile_ms();
  run.origin = kernel.origin();
  run.cache_hit_us = 1000 * median_ms(5, [&] { obtain(); });
  GemmReference reference;
  if (verify) reference = reference_gemm(args);  // before the kernel: d may alias c
  run.median_ms = median_ms(repeat, [&] { kernel.run(args); });
  run.gflops = run.median_ms > 0 ? run.problem.flops() / (run.median_ms * 1e6) : 0;
  run.verified = verify;
  if (verify) run.comparison = compare_gemm(reference, args.d);
  return run;
}

double median_ms(int repeat, const std::function<void()>& fn) {
  fn();
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repeat); ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return median(std::move(times));
}

std::size_t DeviceMirror::add(Tensor& t, const void* data, std::size_t bytes) {
  DeviceBuffer buffer = runtime_.allocate(std::max<std::size_t>(bytes, 1));
  buffer.copy_from_host(data, bytes);
  t.data = buffer.data();
  buffers_.push_back(std::move(buffer));
  return buffers_.size() - 1;
}

namespace {
bool json_errors = false;
}  // namespace

void report_errors_as_json(bool on) { json_errors = on; }

int report_error(const std::string& message, int code) {
  std::cerr << "tessera: error: " << message << "\n";
  // Under --json the error is also one JSON object on stdout, where the result would have been.
  if (json_errors) std::cout << nlohmann::json{{"ok", false}, {"error", message}, {"exit", code}}.dump() << "\n";
  return code;
}

int guarded(const std::function<int()>& body) {
  const auto first_line = [](const std::string& s) { return s.substr(0, s.find('\n')); };
  try {
    return body();
  } catch (const InvalidArgument& e) {
    return report_error(first_line(e.what()), kBadArguments);
  } catch (const EpilogueError& e) {
    return report_error("--" + first_line(e.what()), kBadArguments);
  } catch (const ExprTextError& e) {  // a score modifier: the message names it
    return report_error(first_line(e.what()), kBadArguments);
  } catch (const ConfigError& e) {
    return report_error(first_line(e.what()), kBadArguments);
  } catch (const CompileError& e) {
    return report_error(e.what(), kUnavailable);  // the compiler's whole log: a tessera bug to report
  } catch (const Error& e) {
    return report_error(first_line(e.what()), kUnavailable);
  } catch (const std::bad_alloc&) {
    return report_error("out of memory", kUnavailable);
  } catch (const std::length_error&) {
    return report_error("out of memory (a buffer larger than the address space)", kUnavailable);
  } catch (const std::exception& e) {
    // Not an error tessera names: a bug to report, still answered with a message and an exit code, not an abort.
    return report_error(std::string("internal error: ") + e.what(), kUnavailable);
  }
}

void add_records_options(CLI::App& app, std::string& records_path, std::string& family) {
  app.add_option("--records", records_path, "SQLite tuning records to record into (and resume from)");
  app.add_option("--family", family, "the shape family recorded with each measurement");
}

std::unique_ptr<TuningRecords> open_records(const std::string& path) {
  return path.empty() ? nullptr : std::make_unique<TuningRecords>(path);
}

// The emulator's access counts, per kind: requests, wavefronts (shared) or sectors (global) and the ideal, per
// request; shared kinds add their bank conflicts (wavefronts beyond the ideal).
nlohmann::json profile_json(const EmuProfile& p) {
  nlohmann::json j;
  const auto add = [&](const char* name, const EmuAccessCounters& c, bool shared) {
    const double requests = static_cast<double>(std::max<std::uint64_t>(c.requests, 1));
    nlohmann::json k{{"requests", c.requests},
                     {shared ? "wavefronts" : "sectors", c.transactions},
                     {shared ? "ideal_wavefronts" : "ideal_sectors", c.ideal},
                     {"per_request", static_cast<double>(c.transactions) / requests},
                     {"ideal_per_request", static_cast<double>(c.ideal) / requests}};
    if (shared) k["bank_conflicts"] = c.transactions - c.ideal;
    j[name] = k;
  };
  add("ldmatrix", p.ldmatrix, true);
  add("cp_async_shared", p.cp_async_shared, true);
  add("shared_load", p.shared_load, true);
  add("shared_store", p.shared_store, true);
  add("cp_async_global", p.cp_async_global, false);
  add("global_load", p.global_load, false);
  add("global_store", p.global_store, false);
  return j;
}

void print_profile(const EmuProfile& profile) {
  std::cout << fmt::format("  profile over {} launches (per warp-level request; ideal in brackets):\n",
                           profile.launches);
  const nlohmann::json table = profile_json(profile);
  for (const auto& [name, kind] : table.items())
    std::cout << fmt::format("    {:16} {:>10} requests  {:6.2f} {} per request [{:.2f}]\n", name,
                             kind["requests"].get<std::uint64_t>(), kind["per_request"].get<double>(),
                             kind.contains("wavefronts") ? "wavefronts" : "sectors",
                             kind["ideal_per_request"].get<double>());
}

}  // namespace tessera::cli
