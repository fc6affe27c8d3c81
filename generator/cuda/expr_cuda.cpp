#include "generator/cuda/expr_cuda.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <stdexcept>

namespace tessera {

std::string cuda_float_literal(double value) {
  const float f = static_cast<float>(value);
  if (!std::isfinite(f)) return fmt::format("__int_as_float(0x{:08x})", std::bit_cast<std::uint32_t>(f));
  const std::string text = fmt::format("{}", f);  // shortest text that reads back as the same float
  return fmt::format("({}{}f)", text, text.find_first_of(".e") == std::string::npos ? ".0" : "");
}

std::string print_cuda(const Expr& e, const std::function<std::string(const ExprNode& leaf)>& leaf) {
  const auto arg = [&](int i) { return print_cuda(e->args[static_cast<std::size_t>(i)], leaf); };
  const bool is_int = e->type == ExprType::Int;
  switch (e->op) {
    case ExprOp::Const:
      return is_int ? fmt::format("{}LL", static_cast<long long>(e->value)) : cuda_float_literal(e->value);
    case ExprOp::Var:
    case ExprOp::Read:
      return leaf(*e);
    case ExprOp::Neg:
      return fmt::format("(-{})", arg(0));
    case ExprOp::Add:
      return fmt::format("({} + {})", arg(0), arg(1));
    case ExprOp::Sub:
      return fmt::format("({} - {})", arg(0), arg(1));
    case ExprOp::Mul:
      return fmt::format("({} * {})", arg(0), arg(1));
    case ExprOp::Div:
      return fmt::format("({} / {})", arg(0), arg(1));
    case ExprOp::Min:
      return fmt::format("fminf({}, {})", arg(0), arg(1));
    case ExprOp::Max:
      return fmt::format("fmaxf({}, {})", arg(0), arg(1));
    case ExprOp::Clamp:
      return fmt::format("tessera::epi::clamp({}, {}, {})", arg(0), arg(1), arg(2));
    case ExprOp::Abs:
      return fmt::format("fabsf({})", arg(0));
    case ExprOp::Sqrt:
      return fmt::format("sqrtf({})", arg(0));
    case ExprOp::Relu:
      return fmt::format("tessera::epi::relu({})", arg(0));
    case ExprOp::Exp:
      return fmt::format("expf({})", arg(0));
    case ExprOp::Tanh:
      return fmt::format("tanhf({})", arg(0));
    case ExprOp::Sigmoid:
      return fmt::format("tessera::epi::sigmoid({})", arg(0));
    case ExprOp::Silu:
      return fmt::format("tessera::epi::silu({})", arg(0));
    case ExprOp::Gelu:
      return fmt::format("tessera::epi::gelu({})", arg(0));
    case ExprOp::GeluTanh:
      return fmt::format("tessera::epi::gelu_tanh({})", arg(0));
    case ExprOp::Lt:
      return fmt::format("({} < {})", arg(0), arg(1));
    case ExprOp::Le:
      return fmt::format("({} <= {})", arg(0), arg(1));
    case ExprOp::Gt:
      return fmt::format("({} > {})", arg(0), arg(1));
    case ExprOp::Ge:
      return fmt::format("({} >= {})", arg(0), arg(1));
    case ExprOp::Eq:
      return fmt::format("({} == {})", arg(0), arg(1));
    case ExprOp::Ne:
      return fmt::format("({} != {})", arg(0), arg(1));
    case ExprOp::Select:
      return fmt::format("({} ? {} : {})", arg(0), arg(1), arg(2));
    case ExprOp::ToFloat:
      return fmt::format("static_cast<float>({})", arg(0));
  }
  throw std::logic_error("print_cuda: unknown op");
}

}  // namespace tessera
