#include "generator/core/expr_bounds.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tessera {

namespace {
Interval corners(const Interval& x, const Interval& y, double (*f)(double, double)) {
  const double v[] = {f(x.lo, y.lo), f(x.lo, y.hi), f(x.hi, y.lo), f(x.hi, y.hi)};
  Interval r{INFINITY, -INFINITY};
  for (double c : v) {
    if (std::isnan(c)) return {-INFINITY, INFINITY};  // 0·inf: unbounded
    r.lo = std::min(r.lo, c), r.hi = std::max(r.hi, c);
  }
  return r;
}
}  // namespace

Interval int_bounds(const Expr& e, const std::function<Interval(const std::string& name)>& var) {
  const auto arg = [&](std::size_t i) { return int_bounds(e->args[i], var); };
  switch (e->op) {
    case ExprOp::Const:
      return {e->value, e->value};
    case ExprOp::Var:
      return var(e->name);
    case ExprOp::Neg: {
      const Interval x = arg(0);
      return {-x.hi, -x.lo};
    }
    case ExprOp::Add: {
      const Interval x = arg(0), y = arg(1);
      return {x.lo + y.lo, x.hi + y.hi};
    }
    case ExprOp::Sub: {
      const Interval x = arg(0), y = arg(1);
      return {x.lo - y.hi, x.hi - y.lo};
    }
    case ExprOp::Mul:
      return corners(arg(0), arg(1), [](double a, double b) { return a * b; });
    case ExprOp::Div: {
      const Interval y = arg(1);
      if (y.lo <= 0 && y.hi >= 0) return {-INFINITY, INFINITY};  // a divisor that may be 0
      // Integer division truncates toward zero: the quotient lies between the real quotients' truncations.
      const Interval q = corners(arg(0), y, [](double a, double b) { return a / b; });
      return {std::trunc(q.lo), std::trunc(q.hi)};
    }
    case ExprOp::Select: {
      const Interval x = arg(1), y = arg(2);
      return {std::min(x.lo, y.lo), std::max(x.hi, y.hi)};
    }
    default:
      throw std::logic_error("int_bounds: not an Int expression: " + to_string(e));
  }
}

bool always_holds(const Expr& c, const std::function<Interval(const std::string& name)>& var) {
  if (!is_comparison(c->op) || c->args[0]->type != ExprType::Int) return false;
  const Interval a = int_bounds(c->args[0], var), b = int_bounds(c->args[1], var);
  switch (c->op) {
    case ExprOp::Lt:
      return a.hi < b.lo;
    case ExprOp::Le:
      return a.hi <= b.lo;
    case ExprOp::Gt:
      return a.lo > b.hi;
    case ExprOp::Ge:
      return a.lo >= b.hi;
    default:
      return false;
  }
}

}  // namespace tessera
