// The references: GEMM and attention in plain loops with double accumulation, read straight from the tensors' shapes
// and strides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/tessera.hpp"

namespace tessera {

struct GemmReference {
  std::int64_t batch = 0, m = 0, n = 0;
  std::vector<double> values;     // [batch][m][n]
  std::vector<double> tolerance;  // per element: f32 rounding over K terms plus the epilogue's math
};

// How a computed tensor compares with its reference.
struct Comparison {
  double max_abs_err = 0;
  double max_rel_err = 0;  // max |error| / max |reference| (normwise, so exact zeros do not blow it up)
  std::int64_t mismatches = 0;
  std::string first_mismatch;  // "d[0, 3, 5] = 1.5, expected 2 ± 1e-6"
  bool ok() const { return mismatches == 0; }
};

// Computes what args.d must hold. Call it before the kernel when d aliases an input.
GemmReference reference_gemm(const GemmArgs& args);
// Compares d's contents with the reference; exact = true demands bitwise-equal values (small-integer inputs).
Comparison compare_gemm(const GemmReference& ref, const Tensor& d, bool exact = false);

}  // namespace tessera

namespace tessera {

// Attention in double precision from the tensors' shapes and strides: O (and the log-sum-exp) per query row, with
// the tolerance each row allows an f32 kernel (the magnitude its scores' dot products accumulate rounding over).
struct AttentionReference {
  std::vector<double> o;          // per query row (in batch, head, sequence order), head_dim_v values
  std::vector<double> lse;        // per query row
  std::vector<double> tolerance;  // per query row, for O
  std::vector<double> v_max;      // per query row: the largest |V| it weighs
  std::vector<double> lse_tolerance;
};

AttentionReference reference_attention(const AttentionArgs& args);
// Compares args.o (and args.lse when given) with the reference. `weight_rounding`: the relative rounding of the
// softmax weights before P·V (a tensor-core kernel multiplies 16-bit weights: 2^-11 for f16, 2^-8 for bf16).
Comparison compare_attention(const AttentionReference& ref, const AttentionArgs& args, double weight_rounding = 0);

}  // namespace tessera

namespace tessera {

// SpMM in double precision: each row of D from the B rows its stored entries name (partial edge blocks cut), then
// the GEMM reference's epilogue and tolerance. Compare args.d with compare_gemm.
GemmReference reference_spmm(const SpmmArgs& args);

// SDDMM in double precision, entry by entry from the pattern's arrays.
struct SddmmReference {
  std::vector<double> values, tolerance;  // per entry
};
SddmmReference reference_sddmm(const SddmmArgs& args);
Comparison compare_sddmm(const SddmmReference& ref, const Tensor& out);

// A sparse matrix's elements as a dense row-major f32 M×K array (what dense GEMM peers multiply).
std::vector<float> densify(const SparseMatrix& matrix);

}  // namespace tessera
