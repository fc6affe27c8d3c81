// `tessera gemm M N K ...`: compiles, runs, times and optionally verifies one GEMM.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli_common.hpp"
#include "commands.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "tessera/cuda.hpp"

namespace tessera::cli {

namespace {

struct GemmCommand {
  GemmRequest request;
  int repeat = 5;
  bool verify = false;
  bool json = false;
  bool profile = false;

  int run() const {
    if (repeat < 1) throw InvalidArgument("--repeat", "must be >= 1");
    if (profile && !request.target.starts_with("cuda-emu"))
      throw InvalidArgument("--profile", "needs a cuda-emu:sm_XX target (the SIMT emulator counts the accesses)");
    if (CudaTarget::is_cuda_text(request.target)) return run_cuda();
    Runtime runtime({request.target, 0, request.ir_opt_level});
    const GemmRun r = run_gemm(runtime, request, repeat, verify);
    const GemmProblem& p = r.problem;
    const Comparison& cmp = r.comparison;
    if (json) {
      const auto error = [&](double e) { return verify ? nlohmann::json(e) : nlohmann::json(); };
      nlohmann::json j{{"name", r.spec.name()},
                       {"spec_hash", r.spec.hash().hex()},
                       {"spec", to_json(r.spec)},
                       {"m", p.m},
                       {"n", p.n},
                       {"k", p.k},
                       {"batch", p.batch},
                       {"threads", request.threads ? request.threads : runtime.threads()},
                       {"target", runtime.target().str()},
                       {"epilogue", p.signature.epilogue.text()},
                       {"compile_ms", r.compile_ms},
                       {"cache", r.origin},
                       {"cache_hit_us", r.cache_hit_us},
                       {"median_ms", r.median_ms},
                       {"repeat", repeat},
                       {"gflops", r.gflops},
                       {"verified", verify},
                       {"max_abs_err", error(cmp.max_abs_err)},
                       {"max_rel_err", error(cmp.max_rel_err)},
                       {"ok", r.ok()}};
      std::cout << j.dump() << "\n";
    } else {
      std::cout << fmt::format(
          "{}\n  {}x{}x{} batch {}  {} {:.2f} ms  cache hit {:.1f} us  run {:.3f} ms  "
          "{:.1f} GFLOP/s\n",
          r.spec.name(), p.m, p.n, p.k, p.batch, r.origin == "disk" ? "from disk" : "compile", r.compile_ms,
          r.cache_hit_us, r.median_ms, r.gflops);
      if (verify)
        std::cout << fmt::format("  verify: {}  max abs err {:.3g}  max rel err {:.3g}{}\n", r.ok() ? "ok" : "FAILED",
                                 cmp.max_abs_err, cmp.max_rel_err, r.ok() ? "" : "  first: " + cmp.first_mismatch);
    }
    return r.ok() ? kOk : kVerifyFailed;
  }

  // On a GPU (or in the emulator): host buffers mirrored to the device, the kernel timed with CUDA events (wall time
  // in the emulator), D copied back and verified.
  int run_cuda() const {
    EmuProfile counts;
    EmuOptions emulation;
    if (profile) emulation.profile = &counts;
    CudaRuntime runtime(request.target, emulation);  // no driver or no device: Unavailable, with the reason
    GemmBuffers host = make_gemm_buffers(request);
    GemmArgs device_args = host.args;
    DeviceMirror device(runtime);
    if (host.a16.empty()) {
      device.add(device_args.a, host.a);
      device.add(device_args.b, host.b);
    } else {
      device.add(device_args.a, host.a16);
      device.add(device_args.b, host.b16);
    }
    device.add(device_args.c, host.c);
    // D narrower than f32 (--out-dtype bf16) lives in its own host buffer, which the reference compares.
    const bool narrow_d = !host.d_narrow.empty();
    const std::size_t d_copy = narrow_d ? device.add(device_args.d, host.d_narrow) : device.add(device_args.d, host.d);
    for (auto& [name, tensor] : device_args.inputs) device.add(tensor, host.inputs.at(name));

    const GemmProblem problem = describe_gemm(device_args);
    const CudaGemmKernel kernel =
        runtime.compile(problem, runtime.default_config(device_args).with_overrides(request.config));
    GemmReference reference;
    if (verify) reference = reference_gemm(host.args);
    const double ms = kernel.time_ms(device_args, repeat);
    runtime.synchronize();
    if (narrow_d)
      device.fetch(d_copy, host.d_narrow);
    else
      device.fetch(d_copy, host.d);
    Comparison cmp;
    if (verify) cmp = compare_gemm(reference, host.args.d);
    const double gflops = ms > 0 ? problem.flops() / (ms * 1e6) : 0;
    const bool ok = !verify || cmp.ok();
    if (json) {
      nlohmann::json j{{"name", kernel.name()},
                       {"spec", to_json(kernel.spec())},
                       {"target", runtime.target().str()},
                       {"device", runtime.device_name()},
                       {"m", problem.m},
                       {"n", problem.n},
                       {"k", problem.k},
                       {"batch", problem.batch},
                       {"compile_ms", kernel.report().compile_ms},
                       {"median_ms", ms},
                       {"gflops", gflops},
                       {"verified", verify},
                       {"ok", ok}};
      if (verify) j["max_abs_err"] = cmp.max_abs_err, j["max_rel_err"] = cmp.max_rel_err;
      if (profile) j["profile"] = profile_json(counts);
      std::cout << j.dump() << "\n";
    } else {
      std::cout << fmt::format("{} on {}\n  {}x{}x{} batch {}  compile {:.1f} ms  run {:.3f} ms  {:.1f} GFLOP/s\n",
                               kernel.name(), runtime.device_name(), problem.m, problem.n, problem.k, problem.batch,
                               kernel.report().compile_ms, ms, gflops);
      if (verify)
        std::cout << fmt::format("  verify: {}  max abs err {:.3g}{}\n", ok ? "ok" : "FAILED", cmp.max_abs_err,
                                 ok ? "" : "  first: " + cmp.first_mismatch);
      if (profile) print_profile(counts);
    }
    return ok ? kOk : kVerifyFailed;
  }
};

}  // namespace

void add_gemm_command(CLI::App& app, int& result) {
  auto cmd = std::make_shared<GemmCommand>();
  CLI::App* sub = app.add_subcommand("gemm", "compile and run D = epilogue(A·B, C, ...)");
  add_gemm_options(*sub, cmd->request);
  sub->add_option("--repeat", cmd->repeat, "timed repetitions (median reported)");
  sub->add_flag("--verify", cmd->verify, "compare with the double-precision reference; exit 1 if out of tolerance");
  sub->add_flag("--json", cmd->json, "print one JSON object");
  sub->add_flag("--profile", cmd->profile,
                "cuda-emu targets: count shared-memory wavefronts (bank conflicts) and global sectors per request");
  sub->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });
}

}  // namespace tessera::cli
