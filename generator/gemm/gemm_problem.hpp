// GemmProblem: what to compute, D = epilogue(A·B, C, ...), independent of how.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "generator/core/dtype.hpp"
#include "generator/core/epilogue.hpp"
#include "generator/core/hash.hpp"
#include "generator/core/layout.hpp"

namespace tessera {

struct OperandSignature {
  DType dtype = DType::f32;
  Layout layout = Layout::row_major();
  friend bool operator==(const OperandSignature&, const OperandSignature&) = default;
};

// A user tensor the epilogue reads, as the kernel sees it. Vectors are matrices with one coordinate:
// bias[n] is a 1×N row (RowMajor when contiguous), scale[m] an M×1 column (ColMajor when contiguous).
struct EpilogueInput {
  std::string name;
  IndexForm form = IndexForm::N;
  OperandSignature operand;
  friend bool operator==(const EpilogueInput&, const EpilogueInput&) = default;
};

// Everything that changes the generated code. Runtime sizes and strides are arguments, not part of it.
struct GemmSignature {
  OperandSignature a, b, c, d;
  DType accumulator = DType::f32;
  Epilogue epilogue = Epilogue::linear_combination();
  std::vector<EpilogueInput> inputs;  // one per epilogue tensor, in epilogue.tensors() order

  // Throws InvalidArgument if inputs do not match the epilogue's tensors.
  void check() const;
  friend bool operator==(const GemmSignature& x, const GemmSignature& y);
};

// Whether A and B are 8-bit integers (u8 or i8 each), multiplied exactly into i32 sums and handed to the epilogue as
// f32. Every int8 kernel takes u8 A (activations) × i8 B (weights), the pair vpdpbusd multiplies (is_vnni_int8); AMX
// tiles also take i8 A or u8 B (tdpbssd, tdpbsud, tdpbuud).
inline bool is_int8(const GemmSignature& s) {
  const auto byte = [](DType t) { return t == DType::u8 || t == DType::i8; };
  return byte(s.a.dtype) && byte(s.b.dtype);
}
inline bool is_vnni_int8(const GemmSignature& s) { return s.a.dtype == DType::u8 && s.b.dtype == DType::i8; }

struct GemmProblem {
  std::int64_t m = 1, n = 1, k = 1, batch = 1;
  GemmSignature signature;
  // Where the operands are found when the call starts, for the cost models only: in the caches their footprint fits
  // (a product called again and again), or cold in memory (a layer's weights, read once per step).
  bool a_cold = false, b_cold = false;
  // The threads the call is to run on (0: every thread of the runtime), for the cost models only: a batch split
  // over several threads puts each thread's share of it in that core's caches.
  int threads = 0;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
  }
};

// What makes two problems the same request for a kernel: the signature, the sizes, the threads and where the
// operands are. Computed on every Runtime::gemm call, so without formatting anything.
Hash128 dispatch_key(const GemmProblem& problem);

// The same product seen transposed, Dᵀ = Bᵀ·Aᵀ: A and B swap, every layout is transposed, and epilogue tensors
// indexed [m] become [n] and the reverse. The epilogue text stays (tensors are found by name), so the result
// describes code to generate, not a request: check() refuses it.
GemmSignature transposed(const GemmSignature& signature);
GemmProblem transposed(const GemmProblem& problem);

// Throws InvalidArgument naming the extent that is negative or so large that element offsets could overflow
// (each at most 2^40, each operand at most 2^62 elements).
void check_extents(const GemmProblem& problem);

// The problem with a zero M, N or batch made 1. An empty output computes nothing, so any kernel of its signature
// serves; configs and cost models are chosen for the smallest non-empty problem, whose arithmetic has no zero
// divisors. K stays: K = 0 still writes D = epilogue(0, C).
GemmProblem with_nonempty_output(GemmProblem problem);
inline bool output_is_empty(const GemmProblem& p) { return p.m == 0 || p.n == 0 || p.batch == 0; }

}  // namespace tessera
