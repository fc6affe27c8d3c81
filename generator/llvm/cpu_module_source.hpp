// What the JIT compiles for the CPU, whatever the operation: the entry point's symbol and the function that emits the
// LLVM module defining it. Each operation's emitter makes one from its spec; jit/ never sees an op's spec.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "generator/core/kernel_spec.hpp"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace tessera {

struct CpuModuleSource {
  std::string entry;
  // The spec's hash: with the JIT's own options and the host, the key of the module's object code in the disk
  // cache. Zero: never cached.
  Hash128 key;
  std::function<std::unique_ptr<llvm::Module>(llvm::LLVMContext&)> emit;
};

}  // namespace tessera
