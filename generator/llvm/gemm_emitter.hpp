// emit_llvm: a CpuGemmSpec → an LLVM module holding the CPU GEMM kernel, explicitly vectorised and register-tiled.
#pragma once

#include <memory>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "generator/gemm/cpu_gemm_spec.hpp"

namespace tessera {

// The module defines one external function named spec.name() with the GemmKernelFn signature (gemm_abi.hpp).
// Its functions carry the ISA as attributes; the triple and data layout are left to the JIT or object writer.
std::unique_ptr<llvm::Module> emit_llvm(const CpuGemmSpec& spec, llvm::LLVMContext& context);

}  // namespace tessera
