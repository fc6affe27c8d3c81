// `tessera emit gemm M N K ...`: prints the kernel's LLVM IR or host assembly (CPU targets), or its CUDA source,
// PTX or resource report (CUDA targets).
#include <fmt/format.h>

#include <iostream>

#include "cli_common.hpp"
#include "commands.hpp"
#include "generator/cuda_gemm_spec.hpp"
#include "jit/cuda_gemm_build.hpp"
#include "jit/orc_session.hpp"

namespace tessera::cli {

namespace {
struct EmitCommand {
  GemmRequest request;
  bool assembly = false;
  bool ptx = false;
  bool resources = false;
  bool json = false;

  int run_cpu() const {
    if (ptx || resources || json) throw InvalidArgument("--ptx/--resources/--json", "are for CUDA targets");
    Runtime runtime({request.target, 1, request.ir_opt_level});
    GemmBuffers buffers = make_gemm_buffers(request);
    const GemmProblem problem = describe_gemm(buffers.args);
    // The kernel the runtime would compile (its cost model's choice), with the asked overrides.
    const KernelSpec spec{problem.signature, runtime.choose_config(problem).with_overrides(request.config),
                          runtime.target()};
    std::cout << (assembly ? OrcSession::assembly(spec, request.ir_opt_level)
                           : OrcSession::ir_text(spec, request.ir_opt_level));
    return kOk;
  }

  int run_cuda() const {
    if (assembly) throw InvalidArgument("--asm", "is for CPU targets (use --ptx)");
    const CudaTarget target = CudaTarget::parse(request.target);
    const GemmProblem problem = cuda_problem(request);
    const CudaGemmSpec spec{problem.signature,
                            CudaGemmConfig::default_for(problem, target).with_overrides(request.config), target};
    validate(spec.signature, spec.config, spec.target);
    if (!ptx && !resources && !json) {
      std::cout << emit_cuda(spec).code;
      return kOk;
    }
    const CudaGemmBuild build = build_cuda_gemm(spec, resources || json);
    if (json) {
      std::cout << build.report().dump() << "\n";
    } else if (ptx) {
      std::cout << build.binary.ptx;
    } else {
      const auto& r = build.gemm;
      std::cout << fmt::format(
          "{}\n  {} threads, {} registers, {} bytes shared ({} dynamic), {} bytes stack, spills {} / {} bytes "
          "(store / load)\n  PTX: {} mma.sync, {} ldmatrix, {} cp.async, {} cp.async.wait_group, {} local accesses\n"
          "  compile {:.1f} ms\n",
          build.source.kernel, build.source.threads, r.registers, build.source.shared_bytes + r.static_shared_bytes,
          build.source.shared_bytes, r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes, build.ptx.mma,
          build.ptx.ldmatrix, build.ptx.cp_async, build.ptx.cp_async_wait, build.ptx.local_access,
          build.binary.compile_ms);
    }
    return kOk;
  }
};
}  // namespace

void add_emit_command(CLI::App& app, int& result) {
  auto cmd = std::make_shared<EmitCommand>();
  CLI::App* emit = app.add_subcommand("emit", "print generated code");
  emit->require_subcommand(1);
  CLI::App* gemm = emit->add_subcommand("gemm", "the GEMM kernel for these arguments");
  add_gemm_options(*gemm, cmd->request);
  gemm->add_flag("--asm", cmd->assembly, "CPU: print host assembly instead of LLVM IR");
  gemm->add_flag("--ptx", cmd->ptx, "CUDA: print the PTX NVRTC produces instead of the CUDA source");
  gemm->add_flag("--resources", cmd->resources, "CUDA: compile to CUBIN and print registers, shared memory, spills");
  gemm->add_flag("--json", cmd->json, "CUDA: compile to CUBIN and print one JSON object with the resource report");
  gemm->callback([cmd, &result] {
    result = guarded([&] { return CudaTarget::is_cuda_text(cmd->request.target) ? cmd->run_cuda() : cmd->run_cpu(); });
  });
}

}  // namespace tessera::cli
