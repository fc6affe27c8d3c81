// `tessera library build MANIFEST --out DIR [--jobs N]` and `tessera library schema`: offline kernel libraries.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>

#include "cli_common.hpp"
#include "commands.hpp"
#include "ops/library/library_builder.hpp"

namespace tessera::cli {

namespace {

struct LibraryCommand {
  std::string manifest, out;
  int jobs = 0;

  int build() const {
    std::ifstream file(manifest, std::ios::binary);
    if (!file) throw InvalidArgument("MANIFEST", fmt::format("cannot read '{}'", manifest));
    const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const LibraryManifest m = parse_library_manifest(text);
    if (jobs < 0) throw InvalidArgument("--jobs", "must be >= 0 (0: one per hardware thread)");
    LibraryBuildOptions options;
    options.jobs = jobs;
    // A progress bar with the time left, on a terminal only (a redirected log gets the summary line).
    const bool tty = isatty(STDERR_FILENO);
    const auto start = std::chrono::steady_clock::now();
    options.progress = [&](int done, int total) {
      if (!tty) return;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const int width = 30, filled = total ? width * done / total : width;
      std::cerr << fmt::format("\r[{}{}] step {}/{} · {:.0f}s elapsed, ~{:.0f}s left   ", std::string(filled, '#'),
                               std::string(width - filled, '.'), done, total, elapsed,
                               done ? elapsed * (total - done) / done : 0.0);
      if (done == total) std::cerr << "\r" << std::string(80, ' ') << "\r";
    };
    LibraryBuildReport r;
    try {
      r = build_library(m, out, options);
    } catch (const InvalidArgument&) {
      throw;
    } catch (const Unavailable&) {
      throw;
    } catch (const Error& e) {
      std::cerr << "tessera: error: library " << m.name << ": " << e.what() << "\n";  // the tool's whole output
      return kUnavailable;
    }
    if (r.up_to_date)
      std::cout << fmt::format("{}: up to date ({} kernels, {} variants) in {}\n", m.name, r.kernels, r.variants, out);
    else
      std::cout << fmt::format("{}: {} kernels, {} variants ({} compiled, {} reused) in {} ({:.1f} s)\n", m.name,
                               r.kernels, r.variants, r.compiled, r.reused, out, r.seconds);
    return kOk;
  }
};

}  // namespace

void add_library_command(CLI::App& app, int& result) {
  auto cmd = std::make_shared<LibraryCommand>();
  CLI::App* library = app.add_subcommand("library", "offline kernel libraries: a C header and static/shared libraries");
  library->require_subcommand(1);
  CLI::App* build = library->add_subcommand("build", "build the library a manifest describes");
  build->add_option("MANIFEST", cmd->manifest, "the manifest (JSON; `tessera library schema`)")->required();
  build->add_option("--out", cmd->out, "the library's directory (replaced whole, or left as it was on failure)")
      ->required();
  build->add_option("--jobs", cmd->jobs, "compile threads (0: one per hardware thread)");
  build->callback([cmd, &result] { result = guarded([&] { return cmd->build(); }); });
  library->add_subcommand("schema", "print the manifest's JSON schema")->callback([&result] {
    std::cout << library_manifest_schema();
    result = kOk;
  });
}

}  // namespace tessera::cli
