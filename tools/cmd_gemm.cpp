// `tessera gemm M N K ...`: compiles, runs, times and optionally verifies one GEMM.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli_common.hpp"
#include "commands.hpp"

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
    const GemmRun r = run_gemm(runtime, request, repeat, verify);
    const GemmProblem& p = r.problem;
    const GemmComparison& cmp = r.comparison;
    if (json) {
      const auto error = [&](double e) { return verify ? nlohmann::json(e) : nlohmann::json(); };
      nlohmann::json j{{"name", r.spec.name()},
                       {"spec_hash", r.spec.hash().hex()},
                       {"spec", r.spec.to_json()},
                       {"m", p.m},
                       {"n", p.n},
                       {"k", p.k},
                       {"batch", p.batch},
                       {"threads", request.threads ? request.threads : runtime.threads()},
                       {"target", runtime.target().str()},
                       {"epilogue", p.signature.epilogue.text()},
                       {"compile_ms", r.compile_ms},
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
          "{}\n  {}x{}x{} batch {}  compile {:.2f} ms  cache hit {:.1f} us  run {:.3f} ms  "
          "{:.1f} GFLOP/s\n",
          r.spec.name(), p.m, p.n, p.k, p.batch, r.compile_ms, r.cache_hit_us, r.median_ms, r.gflops);
      if (verify)
        std::cout << fmt::format("  verify: {}  max abs err {:.3g}  max rel err {:.3g}{}\n", r.ok() ? "ok" : "FAILED",
                                 cmp.max_abs_err, cmp.max_rel_err, r.ok() ? "" : "  first: " + cmp.first_mismatch);
    }
    return r.ok() ? kOk : kVerifyFailed;
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
