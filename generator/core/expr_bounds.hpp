// Interval bounds of Int (index) expressions: the range an index can take when each variable ranges over an
// interval, so that a tensor read at a computed index can be proven in range before any kernel runs.
#pragma once

#include <functional>
#include <string>

#include "generator/core/expr.hpp"

namespace tessera {

// A closed interval [lo, hi]; unbounded sides are ±inf.
struct Interval {
  double lo = 0, hi = 0;
  bool within(double first, double last) const { return lo >= first && hi <= last; }
};

// Bounds that contain every value the Int expression takes when each Var node takes any value of var(name). Exact
// for sums, differences and products of independent variables; conservative where a variable repeats or for
// division and select.
Interval int_bounds(const Expr& e, const std::function<Interval(const std::string& name)>& var);

// Whether a Bool condition provably holds for every value of the variables' intervals: comparisons of Int operands
// whose bounds do not overlap the other way. Anything it cannot prove (Float operands, ==, !=) is false.
bool always_holds(const Expr& condition, const std::function<Interval(const std::string& name)>& var);

}  // namespace tessera
