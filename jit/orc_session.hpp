// The LLVM ORC session: compiles emitted modules for the host and returns their entry points.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "generator/gemm/cpu_gemm_spec.hpp"

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

  // Emits, compiles and links the kernel; returns its entry (a GemmKernelFn). Thread-safe.
  void* compile(const CpuGemmSpec& spec);

  // The kernel's LLVM IR, or the host assembly the JIT would run.
  static std::string ir_text(const CpuGemmSpec& spec, int ir_opt_level = 0);
  static std::string assembly(const CpuGemmSpec& spec, int ir_opt_level = 0);

  // The LLVM version string, part of every cache key.
  static std::string llvm_version();

 private:
  OrcOptions options_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::mutex mutex_;
};

}  // namespace tessera
