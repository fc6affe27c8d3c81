// CudaRuntime's shared state: its backend (a GPU or the emulator) and the programs built for it, whatever the
// operation (GEMM in cuda_runtime.cpp, attention in cuda_attention.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "jit/kernel_cache.hpp"
#include "ops/cuda/cuda_backend.hpp"
#include "tessera/cuda.hpp"

namespace tessera {

// Device memory the runtime's launches reuse as scratch (split keys' partial rows), so that a decoding step neither
// allocates nor waits for the device: grown when a launch needs more (after the device is done with the old one),
// freed with the runtime. Launches on the one stream take it in turn; a caller holds `mutex` from reserving it until
// its last kernel that uses it is launched.
struct DeviceScratch {
  std::mutex mutex;
  std::uint64_t address = 0;
  std::size_t bytes = 0;

  void* reserve(const CudaBackend& backend, std::size_t wanted) {
    if (wanted > bytes) {
      if (address) {
        backend.synchronize();
        backend.free(address);
        address = 0, bytes = 0;
      }
      address = backend.allocate(wanted);
      bytes = wanted;
    }
    return reinterpret_cast<void*>(address);
  }
};

struct CudaRuntime::Impl {
  std::shared_ptr<const CudaBackend> backend;
  KernelCache<CudaProgram> programs;  // spec hash → program, each built once however many threads ask
  DeviceScratch scratch;

  ~Impl() {
    if (scratch.address) {
      backend->synchronize();
      backend->free(scratch.address);
    }
  }
};

}  // namespace tessera
