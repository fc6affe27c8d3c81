// The CUDA driver, loaded with dlopen and cuGetProcAddress on first use and never linked: a machine without a GPU
// (or with only the toolkit's stub libcuda) gets a clear "unavailable: why" and the CPU path keeps working.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jit/tma_tensor.hpp"

namespace tessera {

using CuDevicePtr = std::uint64_t;

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm = 0;  // compute capability × 10
  int sm_count = 0;
  std::int64_t memory_bytes = 0;
  int max_shared_per_block_optin = 0;
  std::int64_t l2_bytes = 0;
};

class CudaModule;

class CudaDriver : public std::enable_shared_from_this<CudaDriver> {
 public:
  // Loads a driver library: `path` if given, else $TESSERA_CUDA_DRIVER, else libcuda.so.1. Throws Unavailable when
  // it cannot be loaded, is the toolkit's stub (CUDA_ERROR_STUB_LIBRARY), is too old, or sees no device.
  static std::shared_ptr<const CudaDriver> load(const std::string& path = "");
  // The process-wide driver (loaded once; a failure is remembered with its reason).
  static std::shared_ptr<const CudaDriver> instance();
  // Empty when instance() would succeed, else the reason it fails.
  static std::string unavailable_reason();

  const std::string& library_path() const;
  int driver_version() const;  // e.g. 13000
  int device_count() const;
  CudaDeviceInfo device(int ordinal) const;

  // Device memory and copies on the primary context of device 0.
  CuDevicePtr allocate(std::size_t bytes) const;
  void free(CuDevicePtr pointer) const;
  void copy_to_device(CuDevicePtr dst, const void* src, std::size_t bytes) const;
  void copy_to_host(void* dst, CuDevicePtr src, std::size_t bytes) const;
  void synchronize() const;
  // A TMA descriptor of `tensor` at device addresses (cuTensorMapEncodeTiled; zeros outside the tensor).
  std::array<std::byte, 128> tma_descriptor(const TmaTensor& tensor) const;

  // Milliseconds of GPU time spent by whatever fn enqueues, between a start and a stop CUDA event.
  double time_ms(const std::function<void()>& fn) const;

  // Loads a CUBIN into the primary context of device 0.
  std::shared_ptr<CudaModule> load_module(const std::vector<char>& cubin) const;

  ~CudaDriver();
  struct Api;

 private:
  explicit CudaDriver(std::unique_ptr<Api> api);
  void make_current() const;
  std::unique_ptr<Api> api_;
  friend class CudaModule;
};

// A loaded module; kernels are launched by name.
class CudaModule {
 public:
  // Launches `kernel` with one by-value parameter block. Raises the dynamic shared memory limit when needed.
  void launch(const std::string& kernel, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block,
              unsigned shared_bytes, const void* params, std::size_t params_bytes) const;
  ~CudaModule();

 private:
  friend class CudaDriver;
  CudaModule(std::shared_ptr<const CudaDriver> driver, void* module);
  std::shared_ptr<const CudaDriver> driver_;
  void* module_;
};

}  // namespace tessera
