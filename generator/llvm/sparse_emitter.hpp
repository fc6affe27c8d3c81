// CpuSpmmSpec / CpuSddmmSpec → LLVM modules holding the CPU sparse kernels, composed from the GEMM parts: SpMM is the
// outer-product register tile fed by A's stored values and B's rows gathered by column index, stored through the
// output tile's epilogue; SDDMM is the dot tile over K of an A row against B rows gathered by column.
#pragma once

#include <memory>

#include "generator/llvm/cpu_module_source.hpp"
#include "generator/sparse/cpu_sparse_spec.hpp"

namespace tessera {

// The module defines one external function named spec.name() with the SpmmKernelFn signature (sparse_abi.hpp).
std::unique_ptr<llvm::Module> emit_spmm_llvm(const CpuSpmmSpec& spec, llvm::LLVMContext& context);
CpuModuleSource cpu_module_source(const CpuSpmmSpec& spec);

// The module defines one external function named spec.name() with the SddmmKernelFn signature.
std::unique_ptr<llvm::Module> emit_sddmm_llvm(const CpuSddmmSpec& spec, llvm::LLVMContext& context);
CpuModuleSource cpu_module_source(const CpuSddmmSpec& spec);

}  // namespace tessera
