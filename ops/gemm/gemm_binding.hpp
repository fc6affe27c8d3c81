// Binds user GemmArgs to a kernel: validates every tensor and produces the GemmProblem and the kernel's arguments.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "generator/gemm/gemm_abi.hpp"
#include "tessera/tessera.hpp"

namespace tessera {

struct GemmBinding {
  GemmProblem problem;
  GemmKernelArgs args;            // args.inputs is set by kernel_args()
  std::vector<TensorArg> inputs;  // in problem.signature.inputs order

  GemmKernelArgs kernel_args() const {
    GemmKernelArgs a = args;
    a.inputs = inputs.data();
    return a;
  }
};

// Throws InvalidArgument naming the argument and the rule it breaks.
GemmBinding bind_gemm(const GemmArgs& args);

// A 2-D tensor (or a 3-D one of batch 1) checked as bind_gemm checks its operands: shape, strides, reach, null data.
struct MatrixOperand {
  std::int64_t rows = 0, cols = 0;
  TensorArg arg;
  Layout layout;  // RowMajor (unit column stride), ColMajor (unit row stride) or Strided
  DType dtype = DType::f32;
  std::int64_t bytes = 0;  // from the first to one past the last reachable element
};
MatrixOperand bind_matrix(const Tensor& t, const std::string& name);
// A vector an epilogue reads as tensor[m] or tensor[n] of `length` elements, as bind_gemm binds it.
MatrixOperand bind_vector(const Tensor& t, const std::string& name, IndexForm form, std::int64_t length);

// Bytes an operation reads that its output must not overlap.
struct ReadRange {
  const void* data;
  std::int64_t bytes;
  std::string name;
};

// The output side of any operation whose result is a GEMM-shaped M×N D (GEMM, SpMM): D, C and the epilogue's
// tensors checked as bind_gemm checks them (not batched), their layouts in `signature` (epilogue, c, d, inputs).
struct OutputBinding {
  GemmSignature signature;
  TensorArg c, d;
  std::vector<TensorArg> inputs;  // in signature.inputs order
};
OutputBinding bind_output(const Tensor& c, const Tensor& d, const std::map<std::string, Tensor>& inputs,
                          const Epilogue& epilogue, float beta, std::int64_t m, std::int64_t n,
                          const std::vector<ReadRange>& reads);

// The same call seen as Dᵀ = Bᵀ·Aᵀ, for a kernel of the transposed product (CpuGemmConfig::transpose): M and N
// swap, A and B swap, and every tensor's row and column strides swap.
GemmBinding transposed(const GemmBinding& binding);

}  // namespace tessera
