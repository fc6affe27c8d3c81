// The subcommands of the tessera program; each registers itself on the app and returns its exit code via `result`.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera::cli {

void add_demo_command(CLI::App& app, int& result);
void add_gemm_command(CLI::App& app, int& result);
void add_attention_command(CLI::App& app, int& result);
// `emit attention`, added to the `emit` command.
void add_emit_attention_command(CLI::App& emit, int& result);
// `tune attention`, added to the `tune` command.
void add_tune_attention_command(CLI::App& tune, int& result);
// `spmm` and `sddmm`, and their `emit` subcommands.
void add_sparse_commands(CLI::App& app, int& result);
void add_emit_sparse_commands(CLI::App& emit, int& result);
void add_tune_sparse_commands(CLI::App& tune, int& result);
void add_emit_command(CLI::App& app, int& result);
void add_tune_command(CLI::App& app, int& result);
void add_model_command(CLI::App& app, int& result);
void add_cache_command(CLI::App& app, int& result);
void add_library_command(CLI::App& app, int& result);

}  // namespace tessera::cli
