// `tessera attention B H S D ...`: compiles, runs, times and optionally verifies one fused attention call;
// `tessera emit attention ...` prints its kernel's LLVM IR or host assembly.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>

#include "attention_request.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "generator/attention/attention_json.hpp"
#include "generator/cuda/attention_source.hpp"
#include "tessera/cuda.hpp"
#include "tessera/tuner.hpp"

namespace tessera::cli {

namespace {

// The CPU kernel's types (f16 runs on CUDA targets).
void check_cpu_dtype(const AttentionRequest& request) {
  if (request.dtype == "f16")
    throw InvalidArgument("--dtype", "f16 runs on CUDA targets; the CPU attention kernel takes f32 or bf16");
}

void refuse_cuda(const std::string& target, const char* what) {
  if (CudaTarget::is_cuda_text(target)) throw InvalidArgument("--target", std::string(what) + " is for CPU targets");
}

struct AttentionCommand {
  AttentionRequest request;
  int repeat = 5;
  bool verify = false;
  bool json = false;
  bool profile = false;

  int run() const {
    if (repeat < 1) throw InvalidArgument("--repeat", "must be >= 1");
    if (profile && !request.target.starts_with("cuda-emu"))
      throw InvalidArgument("--profile", "needs a cuda-emu:sm_XX target (the SIMT emulator counts the accesses)");
    if (CudaTarget::is_cuda_text(request.target)) return run_cuda();
    check_cpu_dtype(request);
    AttentionBuffers buffers = make_attention_buffers(request);
    const AttentionArgs& args = buffers.args;
    Runtime runtime({request.target, 0});
    const AttentionProblem problem = runtime.describe(args);
    const AttentionKernel kernel = runtime.compile(
        problem, CpuAttentionConfig::default_for(problem, runtime.target()).with_overrides(request.config));
    AttentionReference reference;
    if (verify) reference = reference_attention(args);  // before the kernel: it also checks the modifier's reads
    const double ms = median_ms(repeat, [&] { kernel.run(args); });
    Comparison cmp;
    if (verify) cmp = compare_attention(reference, args, kernel.weight_rounding());
    const bool ok = !verify || cmp.ok();
    const double gflops = ms > 0 ? problem.flops() / (ms * 1e6) : 0;
    const AttentionSignature& s = problem.signature;
    if (json) {
      const auto error = [&](double e) { return verify ? nlohmann::json(e) : nlohmann::json(); };
      nlohmann::json j{
          {"name", kernel.name()},
          {"spec_hash", kernel.spec().hash().hex()},
          {"spec", to_json(kernel.spec())},
          {"batch", problem.batch},
          {"heads", problem.heads},
          {"kv_heads", problem.kv_heads},
          {"seq_q", problem.seq_q},
          {"seq_kv", problem.seq_kv},
          {"head_dim", s.head_dim_qk},
          {"head_dim_v", s.head_dim_v},
          {"causal", s.causal},
          {"score_mod", s.score_mod.text()},
          {"varlen", problem.varlen()},
          {"threads", request.threads ? request.threads : runtime.threads()},
          {"target", runtime.target().str()},
          {"workspace_bytes", kernel.memory_bytes(problem, request.threads ? request.threads : runtime.threads())},
          {"compile_ms", kernel.compile_ms()},
          {"median_ms", ms},
          {"repeat", repeat},
          {"gflops", gflops},
          {"verified", verify},
          {"max_abs_err", error(cmp.max_abs_err)},
          {"max_rel_err", error(cmp.max_rel_err)},
          {"ok", ok}};
      std::cout << j.dump() << "\n";
    } else {
      std::cout << fmt::format(
          "{}\n  B {} H {}/{} Sq {} Skv {} d {}{}  compile {:.1f} ms  run {:.3f} ms  {:.1f} GFLOP/s\n", kernel.name(),
          problem.batch, problem.heads, problem.kv_heads, problem.seq_q, problem.seq_kv, s.head_dim_qk,
          s.causal ? " causal" : "", kernel.compile_ms(), ms, gflops);
      if (verify)
        std::cout << fmt::format("  verify: {}  max abs err {:.3g}  max rel err {:.3g}{}\n", ok ? "ok" : "FAILED",
                                 cmp.max_abs_err, cmp.max_rel_err, ok ? "" : "  first: " + cmp.first_mismatch);
    }
    return ok ? kOk : kVerifyFailed;
  }

  // On a GPU (or in the emulator): host buffers mirrored to the device, timed with CUDA events (wall time in the
  // emulator), O copied back and verified.
  int run_cuda() const {
    EmuProfile counts;
    EmuOptions emulation;
    if (profile) emulation.profile = &counts;
    CudaRuntime runtime(request.target, emulation);  // no driver or no device: Unavailable, with the reason
    AttentionBuffers host = make_attention_buffers(request);
    if (host.q16.empty()) throw InvalidArgument("--dtype", "the CUDA attention kernel takes f16 or bf16");
    AttentionArgs device_args = host.args;
    DeviceMirror device(runtime);
    device.add(device_args.q, host.q16);
    device.add(device_args.k, host.k16);
    device.add(device_args.v, host.v16);
    const std::size_t o_copy = device.add(device_args.o, host.o16);
    const std::size_t lse_copy = host.lse.empty() ? 0 : device.add(device_args.lse, host.lse);
    const AttentionProblem problem = describe_attention(device_args);
    // --config changes the runtime's own choice for this call.
    std::optional<CudaAttentionConfig> config;
    if (!request.config.empty()) config = runtime.attention_plan(device_args).config.with_overrides(request.config);
    const CudaAttentionLaunchPlan plan = runtime.attention_plan(device_args, config);
    AttentionReference reference;
    if (verify) reference = reference_attention(host.args);
    const double ms = runtime.attention_ms(device_args, repeat, config);
    runtime.synchronize();
    device.fetch(o_copy, host.o16);
    if (!host.lse.empty()) device.fetch(lse_copy, host.lse);
    Comparison cmp;
    // The kernel multiplies 16-bit softmax weights.
    if (verify) cmp = compare_attention(reference, host.args, request.dtype == "bf16" ? 1.0 / 256 : 1.0 / 2048);
    const bool ok = !verify || cmp.ok();
    const double gflops = ms > 0 ? problem.flops() / (ms * 1e6) : 0;
    if (json) {
      nlohmann::json j{{"target", request.target},
                       {"device", runtime.device_name()},
                       {"batch", problem.batch},
                       {"heads", problem.heads},
                       {"kv_heads", problem.kv_heads},
                       {"seq_q", problem.seq_q},
                       {"seq_kv", problem.seq_kv},
                       {"head_dim", problem.signature.head_dim_qk},
                       {"causal", problem.signature.causal},
                       {"name", plan.kernel},
                       {"kv_splits", plan.kv_splits},
                       {"stacked_heads", plan.stacked_heads},
                       // Device memory beyond the tensors: varlen offsets, split keys' partial rows.
                       {"workspace_bytes", plan.workspace_bytes},
                       {"median_ms", ms},
                       {"gflops", gflops},
                       {"verified", verify},
                       {"ok", ok}};
      if (verify) j["max_abs_err"] = cmp.max_abs_err, j["max_rel_err"] = cmp.max_rel_err;
      if (profile) j["profile"] = profile_json(counts);
      std::cout << j.dump() << "\n";
    } else {
      std::cout << fmt::format(
          "{} on {}\n  B {} H {}/{} Sq {} Skv {} d {}{}{}  run {:.3f} ms  {:.1f} GFLOP/s\n", plan.kernel,
          runtime.device_name(), problem.batch, problem.heads, problem.kv_heads, problem.seq_q, problem.seq_kv,
          problem.signature.head_dim_qk, problem.signature.causal ? " causal" : "",
          fmt::format("{}{}", plan.stacked_heads ? ", query heads stacked per KV head" : "",
                      plan.kv_splits > 1 ? fmt::format(", keys in {} splits", plan.kv_splits) : ""),
          ms, gflops);
      if (verify)
        std::cout << fmt::format("  verify: {}  max abs err {:.3g}{}\n", ok ? "ok" : "FAILED", cmp.max_abs_err,
                                 ok ? "" : "  first: " + cmp.first_mismatch);
      if (profile) print_profile(counts);
    }
    return ok ? kOk : kVerifyFailed;
  }
};

struct EmitAttentionCommand {
  AttentionRequest request;
  bool assembly = false, ptx = false, resources = false, json = false;

  // CUDA: the source, or NVRTC's PTX, or the ptxas resources (text or JSON), without a GPU.
  int run_cuda() const {
    if (assembly) throw InvalidArgument("--asm", "is for CPU targets (use --ptx)");
    AttentionBuffers buffers = make_attention_buffers(request);
    if (buffers.q16.empty()) throw InvalidArgument("--dtype", "the CUDA attention kernel takes f16 or bf16");
    const AttentionProblem problem = describe_attention(buffers.args);
    const CudaTarget target = CudaTarget::parse(request.target);
    const CudaAttentionSpec spec{
        problem.signature, CudaAttentionConfig::default_for(problem, target).with_overrides(request.config), target};
    validate(spec.signature, spec.config, spec.target);
    if (!ptx && !resources && !json) {
      std::cout << emit_cuda_attention(spec).code;
      return kOk;
    }
    const CudaCode code = generate_cuda_attention(spec, resources || json);
    const nlohmann::json r = nlohmann::json::parse(code.report);
    if (json)
      std::cout << r.dump() << "\n";
    else if (ptx)
      std::cout << code.ptx;
    else
      std::cout << fmt::format(
          "{}\n  {} threads, {} registers, {} bytes shared, spills {} / {} bytes (store / load)\n"
          "  PTX: {} mma.sync, {} ldmatrix, {} cp.async, {} local accesses\n",
          r["name"].get<std::string>(), r["threads"].get<int>(), r["registers"].get<int>(),
          r["shared_bytes"].get<std::int64_t>(), r["spill_store_bytes"].get<int>(), r["spill_load_bytes"].get<int>(),
          r["mma_count"].get<int>(), r["ldmatrix_count"].get<int>(), r["cp_async_count"].get<int>(),
          r["local_access_count"].get<int>());
    return kOk;
  }

  int run() const {
    if (CudaTarget::is_cuda_text(request.target)) return run_cuda();
    if (ptx || resources || json) throw InvalidArgument("--ptx/--resources/--json", "are for CUDA targets");
    check_cpu_dtype(request);
    AttentionBuffers buffers = make_attention_buffers(request);
    Runtime runtime({request.target, 1});
    const AttentionProblem problem = runtime.describe(buffers.args);
    const CpuAttentionSpec spec{
        problem.signature, CpuAttentionConfig::default_for(problem, runtime.target()).with_overrides(request.config),
        runtime.target()};
    std::cout << (assembly ? attention_host_assembly(spec) : attention_llvm_ir(spec));
    return kOk;
  }
};

struct TuneAttentionCommand {
  AttentionRequest request;
  TuneOptions options;
  std::string records_path, family = "cli";
  bool json = false;

  int run() {
    refuse_cuda(request.target, "tune attention");
    check_cpu_dtype(request);
    if (options.top_k < 1) throw InvalidArgument("--top-k", "must be >= 1");
    if (options.samples < 1) throw InvalidArgument("--samples", "must be >= 1");
    AttentionBuffers buffers = make_attention_buffers(request);
    Runtime runtime({request.target, request.threads});
    const AttentionProblem problem = runtime.describe(buffers.args);
    const auto records = open_records(records_path);
    const AttentionTuneResult r = tune_attention(runtime, problem, options, records.get(), family);
    return print_tune_result(r, problem.flops(), json);
  }
};

}  // namespace

void add_tune_attention_command(CLI::App& tune, int& result) {
  auto cmd = std::make_shared<TuneAttentionCommand>();
  CLI::App* sub = tune.add_subcommand("attention", "time the attention variants of one problem");
  add_attention_options(*sub, cmd->request);
  sub->add_option("--top-k", cmd->options.top_k, "variants timed, best-ranked first");
  sub->add_flag("--exhaustive", cmd->options.exhaustive, "time every variant of the space");
  sub->add_option("--samples", cmd->options.samples, "interleaved rounds (median reported)");
  add_records_options(*sub, cmd->records_path, cmd->family);
  sub->add_flag("--json", cmd->json, "print one JSON object");
  sub->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });
}

void add_attention_command(CLI::App& app, int& result) {
  auto cmd = std::make_shared<AttentionCommand>();
  CLI::App* sub = app.add_subcommand("attention", "compile and run O = softmax(score_mod(scale·Q·Kᵀ))·V");
  add_attention_options(*sub, cmd->request);
  sub->add_option("--repeat", cmd->repeat, "timed repetitions (median reported)");
  sub->add_flag("--verify", cmd->verify, "compare with the double-precision reference; exit 1 if out of tolerance");
  sub->add_flag("--json", cmd->json, "print one JSON object");
  sub->add_flag("--profile", cmd->profile,
                "cuda-emu targets: count shared-memory wavefronts (bank conflicts) and global sectors per request");
  sub->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });
}

void add_emit_attention_command(CLI::App& emit, int& result) {
  auto cmd = std::make_shared<EmitAttentionCommand>();
  CLI::App* sub = emit.add_subcommand("attention", "the attention kernel for these arguments");
  add_attention_options(*sub, cmd->request);
  sub->add_flag("--asm", cmd->assembly, "CPU: print host assembly instead of LLVM IR");
  sub->add_flag("--ptx", cmd->ptx, "CUDA: print the PTX NVRTC produces instead of the CUDA source");
  sub->add_flag("--resources", cmd->resources, "CUDA: compile to CUBIN and print registers, shared memory, spills");
  sub->add_flag("--json", cmd->json, "CUDA: compile to CUBIN and print one JSON object with the resource report");
  sub->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });
}

}  // namespace tessera::cli
