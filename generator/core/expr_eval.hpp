// Evaluates an Expr in double precision: the independent reference for what emitted code computes.
#pragma once

#include <functional>

#include "generator/core/expr.hpp"

namespace tessera {

// `leaf` supplies the value of every Var and Read node.
double evaluate(const Expr& e, const std::function<double(const ExprNode& leaf)>& leaf);

}  // namespace tessera
