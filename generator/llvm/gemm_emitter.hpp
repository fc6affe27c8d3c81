// emit_llvm: a CpuGemmSpec → an LLVM module holding the CPU GEMM kernel, explicitly vectorised and register-tiled,
// composed from the parts in ir_kit, panel_packing and register_tile.
#pragma once

#include <memory>

#include "generator/gemm/cpu_gemm_spec.hpp"
#include "generator/llvm/cpu_module_source.hpp"

namespace tessera {

// The module defines one external function named spec.name() with the GemmKernelFn signature (gemm_abi.hpp).
// Its functions carry the ISA as attributes; the triple and data layout are left to the JIT or object writer.
std::unique_ptr<llvm::Module> emit_llvm(const CpuGemmSpec& spec, llvm::LLVMContext& context);

// The spec as the JIT compiles it: its entry symbol and emit_llvm (validating the spec now, not when compiled).
CpuModuleSource cpu_module_source(const CpuGemmSpec& spec);

}  // namespace tessera
