// `tessera emit gemm M N K ...`: prints the kernel's LLVM IR or host assembly.
#include <iostream>

#include "cli_common.hpp"
#include "commands.hpp"
#include "jit/orc_session.hpp"

namespace tessera::cli {

void add_emit_command(CLI::App& app, int& result) {
  struct EmitCommand {
    GemmRequest request;
    bool assembly = false;
  };
  auto cmd = std::make_shared<EmitCommand>();
  CLI::App* emit = app.add_subcommand("emit", "print generated code");
  emit->require_subcommand(1);
  CLI::App* gemm = emit->add_subcommand("gemm", "the GEMM kernel for these arguments");
  add_gemm_options(*gemm, cmd->request);
  gemm->add_flag("--asm", cmd->assembly, "print host assembly instead of LLVM IR");
  gemm->callback([cmd, &result] {
    result = guarded([&] {
      const Target target = Target::parse(cmd->request.target);
      if (cmd->request.ir_opt_level != 0 && cmd->request.ir_opt_level != 2 && cmd->request.ir_opt_level != 3)
        throw InvalidArgument("--ir-opt", "must be 0, 2 or 3");
      GemmBuffers buffers = make_gemm_buffers(cmd->request);
      const GemmProblem problem = describe_gemm(buffers.args);
      const KernelSpec spec{problem.signature,
                            CpuGemmConfig::default_for(problem, target).with_overrides(cmd->request.config), target};
      std::cout << (cmd->assembly ? OrcSession::assembly(spec, cmd->request.ir_opt_level)
                                  : OrcSession::ir_text(spec, cmd->request.ir_opt_level));
      return kOk;
    });
  });
}

}  // namespace tessera::cli
