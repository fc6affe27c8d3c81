// What each leaf of a GEMM epilogue reads, for both back-ends: acc, alpha, beta, or an element of C or of a named
// input at an offset the operand's layout gives for the output coordinates. The emitters only print the loads.
#pragma once

#include <cstddef>
#include <string>

#include "generator/core/expr.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

enum class EpilogueSource : unsigned char { Accumulator, Alpha, Beta, ZeroC, C, Input };

struct EpilogueRead {
  EpilogueSource source = EpilogueSource::Accumulator;
  std::size_t input = 0;  // Input: its index in the signature's inputs
  std::string tensor;     // C, Input: the prefix of its stride variables, "c" or "in.<name>"
  Expr offset;            // C, Input: the element's offset
  // C, Input: the offset's step along the output's columns; a tensor indexed [m] has none (0): it is broadcast.
  Expr column_step;
  bool broadcast = false;
};

// The read of one Var or Read leaf of `signature`'s epilogue at output coordinates (row, col, batch). Integer leaves
// of the offsets are the coordinates' own and "<tensor>.rs|cs|bs" strides. Throws std::logic_error for a leaf the
// signature does not bind (check() rules that out).
EpilogueRead bind_epilogue_leaf(const GemmSignature& signature, const ExprNode& leaf, const Expr& row, const Expr& col,
                                const Expr& batch);

}  // namespace tessera
