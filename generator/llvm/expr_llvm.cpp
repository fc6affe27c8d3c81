#include "generator/llvm/expr_llvm.hpp"

#include <llvm/IR/Intrinsics.h>

#include <stdexcept>

#include "generator/llvm/vector_math.hpp"

namespace tessera {

llvm::Value* emit_expr(llvm::IRBuilder<>& b, const Expr& e, llvm::Type* float_type,
                       const std::function<llvm::Value*(const ExprNode& leaf)>& leaf) {
  const bool is_int = e->type == ExprType::Int;
  const auto arg = [&](std::size_t i) { return emit_expr(b, e->args[i], float_type, leaf); };
  const auto intrinsic = [&](llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
    return b.CreateIntrinsic(id, {float_type}, args);
  };
  switch (e->op) {
    case ExprOp::Const:
      if (is_int) return b.getInt64(static_cast<std::int64_t>(e->value));
      return llvm::ConstantFP::get(float_type, e->value);
    case ExprOp::Var:
    case ExprOp::Read:
      return leaf(*e);
    case ExprOp::Neg:
      return is_int ? b.CreateNeg(arg(0)) : b.CreateFNeg(arg(0));
    case ExprOp::Add:
      return is_int ? b.CreateAdd(arg(0), arg(1)) : b.CreateFAdd(arg(0), arg(1));
    case ExprOp::Sub:
      return is_int ? b.CreateSub(arg(0), arg(1)) : b.CreateFSub(arg(0), arg(1));
    case ExprOp::Mul:
      return is_int ? b.CreateMul(arg(0), arg(1)) : b.CreateFMul(arg(0), arg(1));
    case ExprOp::Div:
      return is_int ? b.CreateSDiv(arg(0), arg(1)) : b.CreateFDiv(arg(0), arg(1));
    case ExprOp::Min:
      return intrinsic(llvm::Intrinsic::minnum, {arg(0), arg(1)});
    case ExprOp::Max:
      return intrinsic(llvm::Intrinsic::maxnum, {arg(0), arg(1)});
    case ExprOp::Clamp:
      return intrinsic(llvm::Intrinsic::minnum, {intrinsic(llvm::Intrinsic::maxnum, {arg(0), arg(1)}), arg(2)});
    case ExprOp::Abs:
      return intrinsic(llvm::Intrinsic::fabs, {arg(0)});
    case ExprOp::Relu:
      return intrinsic(llvm::Intrinsic::maxnum, {arg(0), llvm::ConstantFP::get(float_type, 0.0)});
    case ExprOp::Exp:
      return emit_exp(b, arg(0));
    case ExprOp::Tanh:
      return emit_tanh(b, arg(0));
    case ExprOp::Sigmoid:
      return emit_sigmoid(b, arg(0));
    case ExprOp::Silu: {
      llvm::Value* x = arg(0);
      return b.CreateFMul(x, emit_sigmoid(b, x));
    }
    case ExprOp::Gelu:
      return emit_gelu(b, arg(0));
    case ExprOp::GeluTanh:
      return emit_gelu_tanh(b, arg(0));
  }
  throw std::logic_error("emit_expr: unknown op");
}

}  // namespace tessera
