// The LLVM ORC session: compiles emitted modules for the host and returns their entry points.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "generator/llvm/cpu_module_source.hpp"
#include "jit/thread_pool.hpp"

namespace llvm::orc {
class LLJIT;
}

namespace tessera {

class DiskCache;

struct OrcOptions {
  // 0 skips the IR optimisation pipeline: emitted IR is already tiled and vectorised, so only the backend
  // (at CodeGenOptLevel::Aggressive) runs. 2 or 3 run LLVM's default module pipeline first.
  int ir_opt_level = 0;
  // Where object code is kept between processes (null: nowhere). Must outlive the session.
  const DiskCache* disk_cache = nullptr;
  // Threads a module's functions may compile on at once (see compile_parts); 1: the calling thread alone.
  int compile_threads = 1;
};

// Object code for the JIT (its code model) or for a shared library (position-independent, small code model).
enum class ObjectKind { jit, library };

// Where a kernel came from: the process's memory, the disk cache, or compiled now.
enum class KernelOrigin { memory, disk, built };
const char* origin_name(KernelOrigin origin);

struct OrcEntry {
  void* address = nullptr;  // of the module's entry, whose signature only the caller knows
  KernelOrigin origin = KernelOrigin::built;
};

class OrcSession {
 public:
  explicit OrcSession(OrcOptions options = {});
  ~OrcSession();
  OrcSession(const OrcSession&) = delete;
  OrcSession& operator=(const OrcSession&) = delete;

  // The module's entry: linked before, or its object code from the disk cache, or emitted and compiled now (and
  // stored on disk). Thread-safe; modules compile concurrently, only linking is serialised.
  OrcEntry compile(const CpuModuleSource& source);
  // The object code the module compiles to on this host (what the disk cache holds): one object, or for the JIT
  // an object bundle (jit/object_bundle.hpp) where its functions compiled in parts. Thread-safe.
  std::string compile_object(const CpuModuleSource& source, ObjectKind kind = ObjectKind::jit) const;
  // The same through the disk cache: taken from it when there, else compiled and stored. `origin` says which.
  std::string cached_object(const CpuModuleSource& source, ObjectKind kind, KernelOrigin* origin = nullptr) const;
  // The disk cache's key of a module: its spec hash with tessera's build, LLVM, the host CPU and the options.
  Hash128 disk_key(const CpuModuleSource& source, ObjectKind kind = ObjectKind::jit) const;
  // The address of another external function of a module compiled before (an entry's helper); throws CompileError
  // if there is none.
  void* address(const std::string& symbol);

  // The module's LLVM IR, or the host assembly the JIT would run.
  static std::string ir_text(const CpuModuleSource& source, int ir_opt_level = 0);
  static std::string assembly(const CpuModuleSource& source, int ir_opt_level = 0);

  // The LLVM version string, part of every cache key.
  static std::string llvm_version();

 private:
  // The module's functions compiled as `parts` objects on the compile pool, or nullopt where the pool is busy
  // with another module (the caller then compiles it whole).
  std::optional<std::vector<std::string>> compile_parts(const CpuModuleSource& source) const;

  OrcOptions options_;
  std::unique_ptr<ThreadPool> compile_pool_;  // compile_threads - 1 workers; null for one thread
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::mutex mutex_;
};

}  // namespace tessera
