// The LLVM ORC session: compiles emitted modules for the host and returns their entry points.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "generator/llvm/cpu_module_source.hpp"

namespace llvm::orc {
class LLJIT;
}

namespace tessera {

struct OrcOptions {
  // 0 skips the IR optimisation pipeline: emitted IR is already tiled and vectorised, so only the backend
  // (at CodeGenOptLevel::Aggressive) runs. 2 or 3 run LLVM's default module pipeline first.
  int ir_opt_level = 0;
};

class OrcSession {
 public:
  explicit OrcSession(OrcOptions options = {});
  ~OrcSession();
  OrcSession(const OrcSession&) = delete;
  OrcSession& operator=(const OrcSession&) = delete;

  // Emits, compiles and links the module; returns its entry's address (whose signature only the caller knows).
  // Thread-safe.
  void* compile(const CpuModuleSource& source);
  // The address of another external function of a module compiled before (an entry's helper); throws CompileError
  // if there is none.
  void* address(const std::string& symbol);

  // The module's LLVM IR, or the host assembly the JIT would run.
  static std::string ir_text(const CpuModuleSource& source, int ir_opt_level = 0);
  static std::string assembly(const CpuModuleSource& source, int ir_opt_level = 0);

  // The LLVM version string, part of every cache key.
  static std::string llvm_version();

 private:
  OrcOptions options_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::mutex mutex_;
};

}  // namespace tessera
