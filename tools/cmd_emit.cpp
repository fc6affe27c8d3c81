// `tessera emit gemm M N K ...`: prints the kernel's LLVM IR or host assembly (CPU targets), or its CUDA source,
// PTX or resource report (CUDA targets).
#include <fmt/format.h>

#include <iostream>

#include <nlohmann/json.hpp>
#include "cli_common.hpp"
#include "commands.hpp"
#include "generator/cuda/gemm_source.hpp"
#include "tessera/cuda.hpp"

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
    GemmBuffers buffers = make_gemm_buffers(request);
    const GemmProblem problem = describe_gemm(buffers.args);
    const CpuTarget named = CpuTarget::named(request.target);
    // The kernel the runtime would compile (its cost model's choice), with the asked overrides; for a target this
    // host cannot run (an ISA or extension it lacks, e.g. cpu:avx2+vnni), default_for's config, emitted and compiled
    // but not run.
    CpuGemmSpec spec{
        problem.signature,
        CpuGemmConfig::overridden(CpuGemmConfig::default_for(problem, named), problem, named, request.config), named};
    if (named.host_has_extensions()) {
      Runtime runtime({request.target, 1, request.ir_opt_level});
      spec = {problem.signature,
              CpuGemmConfig::overridden(runtime.choose_config(problem), problem, runtime.target(), request.config),
              runtime.target()};
    }
    std::cout << (assembly ? gemm_host_assembly(spec, request.ir_opt_level) : gemm_llvm_ir(spec, request.ir_opt_level));
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
    const CudaCode code = generate_cuda_gemm(spec, resources || json);
    if (json) {
      std::cout << code.report << "\n";
    } else if (ptx) {
      std::cout << code.ptx;
    } else {
      const nlohmann::json r = nlohmann::json::parse(code.report);
      std::cout << fmt::format(
          "{}\n  {} threads, {} registers, {} bytes shared ({} dynamic), {} bytes stack, spills {} / {} bytes "
          "(store / load)\n  PTX: {} mma.sync, {} ldmatrix, {} cp.async, {} cp.async.wait_group, {} local accesses\n"
          "  compile {:.1f} ms\n",
          r["name"].get<std::string>(), r["threads"].get<int>(), r["registers"].get<int>(),
          r["shared_bytes"].get<std::int64_t>(), r["dynamic_shared_bytes"].get<std::int64_t>(),
          r["stack_bytes"].get<int>(), r["spill_store_bytes"].get<int>(), r["spill_load_bytes"].get<int>(),
          r["mma_count"].get<int>(), r["ldmatrix_count"].get<int>(), r["cp_async_count"].get<int>(),
          r["cp_async_wait_count"].get<int>(), r["local_access_count"].get<int>(), r["compile_ms"].get<double>());
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
  add_emit_attention_command(*emit, result);
  add_emit_sparse_commands(*emit, result);
}

}  // namespace tessera::cli
