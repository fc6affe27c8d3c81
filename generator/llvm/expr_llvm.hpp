// Prints an Expr as LLVM IR: Float nodes in a given float or <N x float> type, Int nodes as i64.
#pragma once

#include <functional>

#include <llvm/IR/IRBuilder.h>

#include "generator/core/expr.hpp"

namespace tessera {

// `leaf` returns the value of each Var and Read node (already of the right type).
llvm::Value* emit_expr(llvm::IRBuilder<>& b, const Expr& e, llvm::Type* float_type,
                       const std::function<llvm::Value*(const ExprNode& leaf)>& leaf);

}  // namespace tessera
