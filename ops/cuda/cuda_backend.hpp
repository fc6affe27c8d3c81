// Where CUDA kernels run: a GPU through the lazily loaded driver, or the SIMT emulator on the CPU. CudaRuntime is
// written against this interface, so both run the same kernels with the same launch plan.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <span>

#include "generator/gemm/cuda_gemm_spec.hpp"
#include "jit/cuda_gemm_build.hpp"
#include "jit/simt_emulator.hpp"
#include "ops/cuda/tma_descriptor_cache.hpp"
#include "tessera/cuda.hpp"

namespace tessera {

// A GEMM built and loaded for one backend.
class CudaProgram {
 public:
  virtual ~CudaProgram() = default;
  // `extents` are the bytes the launch may touch (the emulator checks every access against them).
  virtual void launch(const std::string& kernel, unsigned grid_x, unsigned grid_z, unsigned block,
                      unsigned shared_bytes, std::span<const std::byte> params,
                      const std::vector<EmuMemoryRange>& extents) const = 0;
  CudaGemmBuild build;
  CudaKernelReport report;
  mutable TmaDescriptorCache tma_descriptors;  // the wgmma kernel's operands, by tensor
};

class CudaBackend {
 public:
  virtual ~CudaBackend() = default;
  virtual const CudaTarget& target() const = 0;
  virtual std::string device_name() const = 0;
  virtual std::int64_t l2_bytes() const = 0;
  virtual std::uint64_t allocate(std::size_t bytes) const = 0;
  virtual void free(std::uint64_t address) const = 0;
  virtual void copy_to_device(std::uint64_t dst, const void* src, std::size_t bytes) const = 0;
  virtual void copy_to_host(void* dst, std::uint64_t src, std::size_t bytes) const = 0;
  virtual void synchronize() const = 0;
  // A TMA descriptor for a tensor in this back-end's memory (the wgmma kernel's operands).
  virtual std::array<std::byte, 128> tma_descriptor(const TmaTensor& tensor) const = 0;
  virtual double time_ms(const std::function<void()>& fn) const = 0;
  virtual std::shared_ptr<const CudaProgram> load(const CudaGemmSpec& spec) const = 0;
  // Any other operation's kernel: its CUDA source and entry (its `build` stays empty).
  virtual std::shared_ptr<const CudaProgram> load_source(const std::string& code, const std::string& kernel) const = 0;
};

// Throws Unavailable (no driver, the stub, no device, or a device that cannot run the target's code).
std::shared_ptr<const CudaBackend> make_gpu_backend(const std::string& target);
// "cuda-emu:sm_XX": the SIMT emulator with the given options; memory is host memory.
std::shared_ptr<const CudaBackend> make_emulator_backend(const std::string& target, const EmuOptions& options);

}  // namespace tessera
