#include "generator/core/expr_eval.hpp"

#include <cmath>
#include <numbers>
#include <stdexcept>

namespace tessera {

double evaluate(const Expr& e, const std::function<double(const ExprNode& leaf)>& leaf) {
  const auto arg = [&](std::size_t i) { return evaluate(e->args[i], leaf); };
  switch (e->op) {
    case ExprOp::Const:
      return e->value;
    case ExprOp::Var:
    case ExprOp::Read:
      return leaf(*e);
    case ExprOp::Neg:
      return -arg(0);
    case ExprOp::Add:
      return arg(0) + arg(1);
    case ExprOp::Sub:
      return arg(0) - arg(1);
    case ExprOp::Mul:
      return arg(0) * arg(1);
    case ExprOp::Div:
      return arg(0) / arg(1);
    case ExprOp::Min:
      return std::fmin(arg(0), arg(1));
    case ExprOp::Max:
      return std::fmax(arg(0), arg(1));
    case ExprOp::Clamp:
      return std::fmin(std::fmax(arg(0), arg(1)), arg(2));
    case ExprOp::Abs:
      return std::fabs(arg(0));
    case ExprOp::Sqrt:
      return std::sqrt(arg(0));
    case ExprOp::Relu:
      return std::fmax(arg(0), 0.0);
    case ExprOp::Exp:
      return std::exp(arg(0));
    case ExprOp::Tanh:
      return std::tanh(arg(0));
    case ExprOp::Sigmoid:
      return 1.0 / (1.0 + std::exp(-arg(0)));
    case ExprOp::Silu: {
      const double x = arg(0);
      return x / (1.0 + std::exp(-x));
    }
    case ExprOp::Gelu: {
      const double x = arg(0);
      return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
    }
    case ExprOp::Lt:
      return arg(0) < arg(1) ? 1.0 : 0.0;
    case ExprOp::Le:
      return arg(0) <= arg(1) ? 1.0 : 0.0;
    case ExprOp::Gt:
      return arg(0) > arg(1) ? 1.0 : 0.0;
    case ExprOp::Ge:
      return arg(0) >= arg(1) ? 1.0 : 0.0;
    case ExprOp::Eq:
      return arg(0) == arg(1) ? 1.0 : 0.0;
    case ExprOp::Ne:
      return arg(0) != arg(1) ? 1.0 : 0.0;
    case ExprOp::Select:
      return arg(0) != 0.0 ? arg(1) : arg(2);
    case ExprOp::ToFloat:
      return arg(0);
    case ExprOp::GeluTanh: {
      const double x = arg(0);
      const double k = std::sqrt(2.0 / std::numbers::pi);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
  }
  throw std::logic_error("evaluate: unknown op");
}

}  // namespace tessera
