// `tessera gemm M N K ...`: compiles, runs, times and optionally verifies one GEMM.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>

#include "cli_common.hpp"
#include "commands.hpp"
#include "tessera/reference.hpp"

namespace tessera::cli {

namespace {

struct GemmCommand {
  GemmRequest request;
  int repeat = 5;
  bool verify = false;
  bool json = false;

  int run() const {
    if (repeat < 1) throw InvalidArgument("--repeat", "must be >= 1");
    Runtime runtime({request.target, 0, request.ir_opt_level});
    GemmBuffers buffers = make_gemm_buffers(request);
    const GemmArgs& args = buffers.args;
    const GemmProblem problem = runtime.describe(args);
    const GemmKernel kernel = runtime.compile(problem);
    const auto hit_start = std::chrono::steady_clock::now();
    runtime.compile(problem);
    const double hit_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - hit_start).count();

    GemmReference ref;
    if (verify) ref = reference_gemm(args);
    const double ms = median_ms(repeat, [&] { kernel.run(args); });
    const double gflops = ms > 0 ? problem.flops() / (ms * 1e6) : 0;
    GemmComparison cmp;
    if (verify) cmp = compare_gemm(ref, args.d);
    const bool ok = !verify || cmp.ok();

    if (json) {
      nlohmann::json j{{"name", kernel.name()},
                       {"spec_hash", kernel.spec().hash().hex()},
                       {"spec", kernel.spec().to_json()},
                       {"m", problem.m},
                       {"n", problem.n},
                       {"k", problem.k},
                       {"batch", problem.batch},
                       {"threads", request.threads ? request.threads : runtime.threads()},
                       {"target", runtime.target().str()},
                       {"epilogue", problem.signature.epilogue.text()},
                       {"compile_ms", kernel.compile_ms()},
                       {"cache_hit_us", hit_us},
                       {"median_ms", ms},
                       {"repeat", repeat},
                       {"gflops", gflops},
                       {"verified", verify},
                       {"max_abs_err", verify ? nlohmann::json(cmp.max_abs_err) : nlohmann::json()},
                       {"max_rel_err", verify ? nlohmann::json(cmp.max_rel_err) : nlohmann::json()},
                       {"ok", ok}};
      std::cout << j.dump() << "\n";
    } else {
      std::cout << fmt::format(
          "{}\n  {}x{}x{} batch {}  compile {:.2f} ms  cache hit {:.1f} us  run {:.3f} ms  "
          "{:.1f} GFLOP/s\n",
          kernel.name(), problem.m, problem.n, problem.k, problem.batch, kernel.compile_ms(), hit_us, ms, gflops);
      if (verify)
        std::cout << fmt::format("  verify: {}  max abs err {:.3g}  max rel err {:.3g}{}\n", ok ? "ok" : "FAILED",
                                 cmp.max_abs_err, cmp.max_rel_err, ok ? "" : "  first: " + cmp.first_mismatch);
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
  sub->callback([cmd, &result] { result = guarded([&] { return cmd->run(); }); });
}

}  // namespace tessera::cli
