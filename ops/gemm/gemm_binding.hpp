// Binds user GemmArgs to a kernel: validates every tensor and produces the GemmProblem and the kernel's arguments.
#pragma once

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

// The same call seen as Dᵀ = Bᵀ·Aᵀ, for a kernel of the transposed product (CpuGemmConfig::transpose): M and N
// swap, A and B swap, and every tensor's row and column strides swap.
GemmBinding transposed(const GemmBinding& binding);

}  // namespace tessera
