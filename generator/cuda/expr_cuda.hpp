// Prints an Expr as CUDA C: Float nodes as f32 expressions over the epilogue functions of
// templates/tessera/epilogue_math.cuh, Int nodes as 64-bit index arithmetic.
#pragma once

#include <functional>
#include <string>

#include "generator/core/expr.hpp"

namespace tessera {

// `leaf` returns the C text of each Var and Read node.
std::string print_cuda(const Expr& e, const std::function<std::string(const ExprNode& leaf)>& leaf);

// A float constant as a CUDA literal that round-trips (1.0f, -2.5e-07f, __int_as_float(0x7f800000)).
std::string cuda_float_literal(double value);

}  // namespace tessera
