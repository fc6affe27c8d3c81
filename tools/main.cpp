// The tessera command line: demo, gemm, attention, spmm, sddmm, emit, tune, model, cache, library.
#include <iostream>

#include "cli_common.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"tessera: JIT-generated GEMM and attention kernels"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tessera ") + TESSERA_VERSION);
  int result = 0;
  tessera::cli::add_demo_command(app, result);
  tessera::cli::add_gemm_command(app, result);
  tessera::cli::add_attention_command(app, result);
  tessera::cli::add_sparse_commands(app, result);
  tessera::cli::add_emit_command(app, result);
  tessera::cli::add_tune_command(app, result);
  tessera::cli::add_model_command(app, result);
  tessera::cli::add_cache_command(app, result);
  tessera::cli::add_library_command(app, result);
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--json") tessera::cli::report_errors_as_json(true);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return tessera::cli::report_error(e.what(), tessera::cli::kBadArguments);
  }
  return result;
}
