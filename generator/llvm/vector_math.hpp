// Vectorised f32 math for generated CPU code (LLVM has no vector exp/erf/tanh that avoid libm calls).
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace tessera {

// Each works on float or <N x float> and is accurate to a few ulp (erf and gelu to ~1e-7 absolute).
llvm::Value* emit_exp(llvm::IRBuilder<>& b, llvm::Value* x);
// 2^x for x ≤ 128, flushed to 2^-126 below −126 (a softmax's weights, where that is far below rounding), to the
// `bits` of mantissa the caller keeps: 24 (f32), or 8 for weights rounded to bf16 (a shorter polynomial).
llvm::Value* emit_exp2(llvm::IRBuilder<>& b, llvm::Value* x, int bits = 24);
// The natural log of positive normal values (what a softmax's row sum is); others are not handled.
llvm::Value* emit_log(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_tanh(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_sigmoid(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_erf(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_gelu(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_gelu_tanh(llvm::IRBuilder<>& b, llvm::Value* x);

}  // namespace tessera
