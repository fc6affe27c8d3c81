#include "generator/llvm/expr_llvm.hpp"

#include <llvm/IR/Intrinsics.h>

#include <stdexcept>
#include <tuple>
#include <utility>

#include "generator/llvm/vector_math.hpp"

namespace tessera {

namespace {
// Two operands as one shape: a scalar beside a vector (an index beside the per-lane key positions) is splat.
std::pair<llvm::Value*, llvm::Value*> same_shape(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y) {
  if (x->getType()->isVectorTy() == y->getType()->isVectorTy()) return {x, y};
  const auto lanes = llvm::cast<llvm::VectorType>((x->getType()->isVectorTy() ? x : y)->getType())->getElementCount();
  return {x->getType()->isVectorTy() ? x : b.CreateVectorSplat(lanes, x),
          y->getType()->isVectorTy() ? y : b.CreateVectorSplat(lanes, y)};
}

// Both operands of a comparison as one type: a scalar beside a vector is splat.
llvm::Value* compare(llvm::IRBuilder<>& b, ExprOp op, bool is_int, llvm::Value* x, llvm::Value* y) {
  std::tie(x, y) = same_shape(b, x, y);
  switch (op) {
    case ExprOp::Lt:
      return is_int ? b.CreateICmpSLT(x, y) : b.CreateFCmpOLT(x, y);
    case ExprOp::Le:
      return is_int ? b.CreateICmpSLE(x, y) : b.CreateFCmpOLE(x, y);
    case ExprOp::Gt:
      return is_int ? b.CreateICmpSGT(x, y) : b.CreateFCmpOGT(x, y);
    case ExprOp::Ge:
      return is_int ? b.CreateICmpSGE(x, y) : b.CreateFCmpOGE(x, y);
    case ExprOp::Eq:
      return is_int ? b.CreateICmpEQ(x, y) : b.CreateFCmpOEQ(x, y);
    default:
      return is_int ? b.CreateICmpNE(x, y) : b.CreateFCmpUNE(x, y);
  }
}
}  // namespace

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
    case ExprOp::Sub:
    case ExprOp::Mul:
    case ExprOp::Div: {
      const auto [x, y] = same_shape(b, arg(0), arg(1));
      if (is_int)
        return e->op == ExprOp::Add   ? b.CreateAdd(x, y)
               : e->op == ExprOp::Sub ? b.CreateSub(x, y)
               : e->op == ExprOp::Mul ? b.CreateMul(x, y)
                                      : b.CreateSDiv(x, y);
      return e->op == ExprOp::Add   ? b.CreateFAdd(x, y)
             : e->op == ExprOp::Sub ? b.CreateFSub(x, y)
             : e->op == ExprOp::Mul ? b.CreateFMul(x, y)
                                    : b.CreateFDiv(x, y);
    }
    case ExprOp::Min:
      return intrinsic(llvm::Intrinsic::minnum, {arg(0), arg(1)});
    case ExprOp::Max:
      return intrinsic(llvm::Intrinsic::maxnum, {arg(0), arg(1)});
    case ExprOp::Clamp:
      return intrinsic(llvm::Intrinsic::minnum, {intrinsic(llvm::Intrinsic::maxnum, {arg(0), arg(1)}), arg(2)});
    case ExprOp::Abs:
      return intrinsic(llvm::Intrinsic::fabs, {arg(0)});
    case ExprOp::Sqrt:
      return intrinsic(llvm::Intrinsic::sqrt, {arg(0)});
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
    case ExprOp::Lt:
    case ExprOp::Le:
    case ExprOp::Gt:
    case ExprOp::Ge:
    case ExprOp::Eq:
    case ExprOp::Ne:
      return compare(b, e->op, e->args[0]->type == ExprType::Int, arg(0), arg(1));
    case ExprOp::Select: {
      llvm::Value* c = arg(0);
      auto [x, y] = same_shape(b, arg(1), arg(2));
      // A scalar condition (from index math) chooses whole vectors; a vector one chooses lane by lane.
      if (c->getType()->isVectorTy() && !x->getType()->isVectorTy()) {
        const auto lanes = llvm::cast<llvm::VectorType>(c->getType())->getElementCount();
        x = b.CreateVectorSplat(lanes, x), y = b.CreateVectorSplat(lanes, y);
      }
      return b.CreateSelect(c, x, y);
    }
    case ExprOp::ToFloat: {
      llvm::Value* x = arg(0);
      if (x->getType()->isVectorTy())
        return b.CreateSIToFP(x, llvm::VectorType::get(float_type->getScalarType(),
                                                       llvm::cast<llvm::VectorType>(x->getType())->getElementCount()));
      llvm::Value* f = b.CreateSIToFP(x, float_type->getScalarType());
      return float_type->isVectorTy()
                 ? b.CreateVectorSplat(llvm::cast<llvm::VectorType>(float_type)->getElementCount(), f)
                 : f;
    }
  }
  throw std::logic_error("emit_expr: unknown op");
}

}  // namespace tessera
