// SpmmProblem and SddmmProblem: what to compute with a sparse operand, independent of how, and the statistics of a
// sparsity pattern that choose how (inspector output, cost-model features).
//
// SpMM is a GEMM whose A is stored sparse: D = epilogue(A·B, C, inputs) with A sparse M×K, B dense K×N. Its dense
// side (B, C, D, the epilogue and its tensors) is a GemmSignature, so the epilogue means exactly what it means for
// GEMM and is bound by the same code. SDDMM samples a GEMM at a pattern: for each stored (i, j) of the pattern,
// out[p] = epilogue(dot(A[i,:], B[j,:])) in the pattern's order, the epilogue in the sampled dialect (acc, alpha, s,
// tensors [m] and [n]); its dense side is the GemmSignature of A (M×K) and Bᵀ (K×N).
#pragma once

#include <array>
#include <cstdint>

#include "generator/core/sparse_format.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

// A pattern's shape in stored entries (non-zeros for CSR, blocks for BSR) per row (block row for BSR).
struct PatternStats {
  std::int64_t rows = 0;        // block rows
  std::int64_t nnz = 0;         // stored entries
  double mean_row = 0;          // entries per row
  double stddev_row = 0;        // their spread
  std::int64_t max_row = 0;     // the longest row
  std::int64_t empty_rows = 0;  // rows without entries
  double block_fill = 1;        // share of a BSR block's values that are non-zero (1 for CSR)
  // CSR: the share of the values that would be non-zero if the pattern were stored in square blocks of each side of
  // kSquareBlockSides (0 where the matrix is smaller than the block); square_block_for (generator/cost/sparse_cost)
  // weighs them against the CSR kernel's speed for a given N.
  static constexpr std::array<int, 3> kSquareBlockSides{4, 8, 16};
  std::array<double, 3> square_block_fill{};
  friend bool operator==(const PatternStats&, const PatternStats&) = default;
};

struct SpmmSignature {
  SparseSignature a;
  GemmSignature dense;  // b, c, d, epilogue and inputs; dense.a is A's value type, row-major, for the printers only

  // Throws InvalidArgument naming the field and the rule.
  void check() const;
  friend bool operator==(const SpmmSignature&, const SpmmSignature&) = default;
};

struct SpmmProblem {
  std::int64_t m = 0, k = 0, n = 0;  // elements
  SpmmSignature signature;
  PatternStats pattern;
  int threads = 0;
  // Multiply-adds of the stored values: 2·values·N (BSR counts the zeros stored inside blocks).
  double flops() const;
  // The least traffic: A's arrays, B once, D written (and C read when the epilogue reads it).
  double min_bytes() const;
};

struct SddmmSignature {
  SparseSignature pattern;
  GemmSignature dense;  // a (M×K), b as Bᵀ (K×N), d the output's value type; the epilogue in the sampled dialect

  void check() const;
  friend bool operator==(const SddmmSignature&, const SddmmSignature&) = default;
};

struct SddmmProblem {
  std::int64_t m = 0, n = 0, k = 0;
  SddmmSignature signature;
  PatternStats pattern;
  int threads = 0;
  double flops() const;  // 2·nnz·K
  // The least traffic: the pattern, A and B once, the output written.
  double min_bytes() const;
};

}  // namespace tessera
