// A CpuAttentionSpec → an LLVM module holding the CPU attention kernel: FlashAttention-2's forward loop over one
// block of query rows, composed from the GEMM parts (panel packing, the outer-product register tile, the vector
// math library and the Expr printer for the score modifier).
#pragma once

#include <memory>

#include "generator/attention/cpu_attention_spec.hpp"
#include "generator/llvm/cpu_module_source.hpp"

namespace tessera {

// The module defines one external function named spec.name() with the AttentionKernelFn signature
// (attention_abi.hpp).
std::unique_ptr<llvm::Module> emit_attention_llvm(const CpuAttentionSpec& spec, llvm::LLVMContext& context);

// The spec as the JIT compiles it (validated now, not when compiled).
CpuModuleSource cpu_module_source(const CpuAttentionSpec& spec);

}  // namespace tessera
