// The CUDA source of a sparse spec: the Sputnik-style SpMM or SDDMM template instantiated with the spec's index and
// value types, vector width and warps, and the epilogue printed from Expr, behind one extern "C" entry.
#pragma once

#include <string>

#include "generator/sparse/cuda_sparse_spec.hpp"

namespace tessera {

struct CudaSparseSource {
  std::string code, kernel;
  int threads = 0, shared_bytes = 0;
};

CudaSparseSource emit_cuda_spmm(const CudaSpmmSpec& spec);
CudaSparseSource emit_cuda_sddmm(const CudaSddmmSpec& spec);

}  // namespace tessera
