#include "jit/host_kernel_compiler.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <vector>

#include "generator/core/error.hpp"
#include "generator/gemm/gemm_naming.hpp"
#include "jit/disk_cache.hpp"
#include "jit/embedded_templates.hpp"
#include "jit/subprocess.hpp"

extern char** environ;

namespace tessera {

namespace fs = std::filesystem;

namespace {
std::string env(const char* name) { return environment(name); }
std::string unique_suffix() { return unique_file_suffix(); }

void write_file(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw Error("emulator: cannot write " + path.string());
}

// XXH3-128 of a file's bytes, as hex ("" when it cannot be read).
std::string file_digest(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return hash_text(bytes).hex();
}

std::string compiler() { return env("TESSERA_HOST_CXX").empty() ? "c++" : env("TESSERA_HOST_CXX"); }

// The templates as files, once per templates hash: written to a temporary directory renamed into place.
fs::path templates_dir(const fs::path& root) {
  const fs::path dir = root / ("templates-" + embedded_templates_hash().hex().substr(0, 16));
  if (fs::exists(dir / "tessera" / "emu" / "prelude.cuh")) return dir;
  const fs::path tmp = root / ("tmp-templates-" + unique_suffix());
  for (const auto& file : embedded_templates()) {
    const fs::path path = tmp / std::string(file.path);
    fs::create_directories(path.parent_path());
    write_file(path, file.text);
  }
  std::error_code error;
  fs::rename(tmp, dir, error);
  if (error) fs::remove_all(tmp, error);  // another process put the same files in place first
  return dir;
}

const std::vector<std::string>& compile_flags() {
  static const std::vector<std::string> flags{"-std=c++20",      "-O1",      "-fPIC", "-shared", "-w",
                                              "-fno-exceptions", "-fno-rtti"};
  return flags;
}
}  // namespace

namespace {
HostKernelLibrary compile_host_kernel_in(const fs::path& root, const std::string& source, const std::string& name);

std::string with_emulator_entries(const std::string& source) {
  static const std::regex kernel(
      R"(extern\s+"C"\s+__global__\s+void\s+(?:__cluster_dims__\s*\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)\s*)?)"
      R"((?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\()");
  std::string out = source + "\n// Emulator entries: the parameter block as bytes (tessera/emu/prelude.cuh).\n";
  for (auto it = std::sregex_iterator(source.begin(), source.end(), kernel); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[4].str();
    out += fmt::format("extern \"C\" void {0}{1}(const void* params) {{ tessera_emu_invoke({0}, params); }}\n", name,
                       kEmulatorEntrySuffix);
    if ((*it)[1].matched)
      out += fmt::format(
          "extern \"C\" __attribute__((visibility(\"default\"))) const unsigned {}{}[3] = {{{}, {}, {}}};\n", name,
          kEmulatorClusterSuffix, (*it)[1].str(), (*it)[2].str(), (*it)[3].str());
  }
  return out;
}

}  // namespace

HostKernelLibrary compile_host_kernel(const std::string& kernel_source, const std::string& name) {
  const fs::path root = fs::path(tessera_cache_dir()) / "emu";
  try {
    return compile_host_kernel_in(root, with_emulator_entries(kernel_source), name);
  } catch (const fs::filesystem_error& e) {
    // A cache that cannot be written (read-only, a file where a folder should be, a full disk) is a reason the
    // emulator cannot run here, not a crash.
    throw Unavailable(fmt::format("emulator: the kernel cache {} cannot be used: {}", root.string(), e.what()));
  }
}

namespace {
HostKernelLibrary compile_host_kernel_in(const fs::path& root, const std::string& source, const std::string& name) {
  fs::create_directories(root);
  const fs::path includes = templates_dir(root);
  // The key covers everything the library depends on: the source, the templates it includes, the compiler and flags.
  std::string key_text = source + "\n" + embedded_templates_hash().hex() + "\n" + compiler();
  for (const auto& flag : compile_flags()) key_text += " " + flag;
  const fs::path library = root / (name.substr(0, 48) + "-" + hash_text(key_text).hex().substr(0, 20) + ".so");

  // Each library has a digest beside it: a truncated or altered file (a crash mid-copy, a full disk, a bit flip) is
  // rebuilt instead of being mapped and run (a truncated one died with SIGBUS, a flipped one ran wrong).
  const fs::path digest = fs::path(library.string() + ".xxh3");
  const auto intact = [&] {
    std::ifstream in(digest);
    std::string recorded;
    return std::getline(in, recorded) && fs::exists(library) && recorded == file_digest(library);
  };

  HostKernelLibrary result;
  result.path = library.string();
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!intact()) {
      std::error_code ignored;
      fs::remove(library, ignored);
      const auto start = std::chrono::steady_clock::now();
      const std::string suffix = unique_suffix();
      const fs::path cpp = root / ("tmp-" + suffix + ".cpp"), so = root / ("tmp-" + suffix + ".so");
      const fs::path log = root / ("tmp-" + suffix + ".log"), tmp_digest = root / ("tmp-" + suffix + ".xxh3");
      // However this ends (a compiler that is missing or fails, a full disk), no temporary file stays behind.
      struct Cleanup {
        std::vector<fs::path> paths;
        ~Cleanup() {
          std::error_code ignored;
          for (const auto& p : paths) fs::remove(p, ignored);
        }
      } cleanup{{cpp, so, log, tmp_digest}};
      write_file(cpp, source);
      std::vector<std::string> argv{compiler()};
      argv.insert(argv.end(), compile_flags().begin(), compile_flags().end());
      argv.insert(argv.end(), {"-I", includes.string(), "-include", "tessera/emu/prelude.cuh", "-x", "c++",
                               cpp.string(), "-o", so.string()});
      std::string output;
      int status = 0;
      try {
        status = run_process(argv, output, log);
      } catch (const Unavailable& e) {
        throw Unavailable(std::string("emulator: the host compiler: ") + e.what());
      }
      if (status != 0) {
        throw CompileError(fmt::format("emulator: the host compiler rejected {} (exit {}):\n{}", name, status, output));
      }
      write_file(tmp_digest, file_digest(so) + "\n");
      // Both renames are atomic; a reader that finds the library before its digest, or beside an older digest,
      // sees a mismatch and builds the same library again.
      fs::rename(tmp_digest, digest);
      fs::rename(so, library);
      result.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    result.handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (result.handle) return result;
    // A foreign file under the cache name: discard it and build again.
    std::error_code ignored;
    fs::remove(library, ignored);
    fs::remove(digest, ignored);
  }
  throw Error(fmt::format("emulator: cannot load {}: {}", library.string(), dlerror()));
}

}  // namespace

}  // namespace tessera
