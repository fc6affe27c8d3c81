// CudaRuntime's shared state: its backend (a GPU or the emulator) and the programs built for it, whatever the
// operation (GEMM in cuda_runtime.cpp, attention in cuda_attention.cpp).
#pragma once

#include <memory>

#include "jit/kernel_cache.hpp"
#include "ops/cuda/cuda_backend.hpp"
#include "tessera/cuda.hpp"

namespace tessera {

struct CudaRuntime::Impl {
  std::shared_ptr<const CudaBackend> backend;
  KernelCache<CudaProgram> programs;  // spec hash → program, each built once however many threads ask
};

}  // namespace tessera
