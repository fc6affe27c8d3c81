// A CUDA GEMM built for one architecture: the generated source, NVRTC's PTX and CUBIN, the ptxas resources of its
// kernels and the instruction counts of its PTX.
#pragma once

#include <nlohmann/json.hpp>

#include "generator/cuda/gemm_source.hpp"
#include "generator/gemm/cuda_gemm_spec.hpp"
#include "jit/nvrtc.hpp"

namespace tessera {

struct CudaGemmBuild {
  CudaGemmSpec spec;
  CudaSource source;
  CudaBinary binary;
  PtxCounts ptx;
  KernelResources gemm;    // the GEMM kernel (zero when only PTX was built)
  KernelResources reduce;  // the split-K reduction, when there is one

  // One JSON object: name, arch, registers, shared_bytes (dynamic + static), spill and stack bytes, compile_ms,
  // threads, the PTX counts (mma_count, ldmatrix_count, cp_async_count, cp_async_wait_count, local_access_count),
  // the config and the reduction kernel's figures.
  nlohmann::json report() const;
};

// validate → emit_cuda → NVRTC (CUBIN and ptxas report when `cubin`, else PTX only).
CudaGemmBuild build_cuda_gemm(const CudaGemmSpec& spec, bool cubin = true);

}  // namespace tessera
