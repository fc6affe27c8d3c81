// `tessera attention B H S D ...`: compiles, runs, times and optionally verifies one fused attention call;
// `tessera emit attention ...` prints its kernel's LLVM IR or host assembly.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>

#include "attention_request.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "tessera/cuda.hpp"
#include "tessera/tuner.hpp"

namespace tessera::cli {

namespace {

void refuse_cuda(const std::string& target) {
  if (CudaTarget::is_cuda_text(target))
    throw Unavailable("the CUDA attention kernel is not built yet; use --target cpu, cpu:avx512 or cpu:avx2");
}

struct AttentionCommand {
  AttentionRequest request;
  int repeat = 5;
  bool verify = false;
  bool json = false;

  int run() const {
    if (repeat < 1) throw InvalidArgument("--repeat", "must be >= 1");
    refuse_cuda(request.target);
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
    if (verify) cmp = compare_attention(reference, args);
    const bool ok = !verify || cmp.ok();
    const double gflops = ms > 0 ? problem.flops() / (ms * 1e6) : 0;
    const AttentionSignature& s = problem.signature;
    if (json) {
      const auto error = [&](double e) { return verify ? nlohmann::json(e) : nlohmann::json(); };
      nlohmann::json j{
          {"name", kernel.name()},
          {"spec_hash", kernel.spec().hash().hex()},
          {"spec", kernel.spec().to_json()},
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
};

struct EmitAttentionCommand {
  AttentionRequest request;
  bool assembly = false;

  int run() const {
    refuse_cuda(request.target);
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
  bool json = false;

  int run() {
    refuse_cuda(request.target);
    if (options.top_k < 1) throw InvalidArgument("--top-k", "must be >= 1");
    if (options.samples < 1) throw InvalidArgument("--samples", "must be >= 1");
    AttentionBuffers buffers = make_attention_buffers(request);
    Runtime runtime({request.target, request.threads});
    const AttentionProblem problem = runtime.describe(buffers.args);
    const AttentionTuneResult r = tune_attention(runtime, problem, options);
    const double flops = problem.flops();
    if (json) {
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& m : r.measured)
        rows.push_back({{"config", m.config.to_json()},
                        {"spec_hash", m.spec_hash},
                        {"median_ns", m.median_ns},
                        {"spread", m.spread},
                        {"gflops", flops / m.median_ns},
                        {"predicted_cycles", m.predicted_cycles}});
      std::cout << nlohmann::json{{"space", r.space}, {"best", r.best}, {"measured", rows}}.dump() << "\n";
      return kOk;
    }
    std::cout << fmt::format("{} variants, {} timed (default first, then the analytic order)\n", r.space,
                             r.measured.size());
    for (std::size_t i = 0; i < r.measured.size(); ++i) {
      const auto& m = r.measured[i];
      std::cout << fmt::format("{} {:<60} {:>10.1f} us {:>7.1f} GFLOP/s  spread {:.3f}\n", i == r.best ? "*" : " ",
                               m.config.to_json().dump(), m.median_ns / 1e3, flops / m.median_ns, m.spread);
    }
    return kOk;
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
  sub->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });
}

void add_emit_attention_command(CLI::App& emit, int& result) {
  auto cmd = std::make_shared<EmitAttentionCommand>();
  CLI::App* sub = emit.add_subcommand("attention", "the attention kernel for these arguments");
  add_attention_options(*sub, cmd->request);
  sub->add_flag("--asm", cmd->assembly, "print host assembly instead of LLVM IR");
  sub->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });
}

}  // namespace tessera::cli
