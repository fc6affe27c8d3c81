// The CUDA backend on a real GPU: NVRTC builds CUBINs, the driver loads and launches them.
#include <fmt/format.h>

#include "jit/cuda_driver.hpp"
#include "jit/nvrtc.hpp"
#include "ops/cuda/cuda_backend.hpp"

namespace tessera {

namespace {
class GpuProgram : public CudaProgram {
 public:
  GpuProgram(std::shared_ptr<const CudaDriver> driver, const CudaGemmSpec& spec) : driver_(std::move(driver)) {
    build = build_cuda_gemm(spec, true);
    report = {build.gemm.registers,         build.source.shared_bytes + build.gemm.static_shared_bytes,
              build.gemm.spill_store_bytes, build.gemm.spill_load_bytes,
              build.gemm.stack_bytes,       build.binary.compile_ms};
    module_ = driver_->load_module(build.binary.cubin);
  }
  GpuProgram(std::shared_ptr<const CudaDriver> driver, const std::string& code, const std::string& kernel,
             const CudaTarget& target)
      : driver_(std::move(driver)) {
    const CudaBinary binary = Nvrtc::instance().compile(code, kernel, target, true);
    const KernelResources& r = binary.resources.at(kernel);
    report = {r.registers,        r.static_shared_bytes, r.spill_store_bytes,
              r.spill_load_bytes, r.stack_bytes,         binary.compile_ms};
    module_ = driver_->load_module(binary.cubin);
  }
  void launch(const std::string& kernel, unsigned grid_x, unsigned grid_z, unsigned block, unsigned shared_bytes,
              std::span<const std::byte> params, const std::vector<EmuMemoryRange>&) const override {
    module_->launch(kernel, grid_x, 1, grid_z, block, shared_bytes, params.data(), params.size());
  }

 private:
  std::shared_ptr<const CudaDriver> driver_;
  std::shared_ptr<CudaModule> module_;
};

class GpuBackend : public CudaBackend {
 public:
  explicit GpuBackend(const std::string& text) : driver_(CudaDriver::instance()), device_(driver_->device(0)) {
    target_ = CudaTarget::parse(text == "cuda" ? fmt::format("cuda:sm_{}", device_.sm) : text);
    // CUBINs run on the same major architecture at an equal or newer minor; sm_90a only on sm_90.
    if (device_.sm / 10 != target_.sm / 10 || device_.sm < target_.sm)
      throw Unavailable(fmt::format("device 0 ({}) is sm_{}; it cannot run code built for {}", device_.name, device_.sm,
                                    target_.arch()));
    target_.sm_count = device_.sm_count;
    target_.max_shared_per_block = device_.max_shared_per_block_optin;
  }
  const CudaTarget& target() const override { return target_; }
  std::string device_name() const override { return device_.name; }
  std::int64_t l2_bytes() const override { return device_.l2_bytes; }
  std::uint64_t allocate(std::size_t bytes) const override { return driver_->allocate(bytes); }
  void free(std::uint64_t address) const override { driver_->free(address); }
  void copy_to_device(std::uint64_t dst, const void* src, std::size_t bytes) const override {
    driver_->copy_to_device(dst, src, bytes);
  }
  void copy_to_host(void* dst, std::uint64_t src, std::size_t bytes) const override {
    driver_->copy_to_host(dst, src, bytes);
  }
  void synchronize() const override { driver_->synchronize(); }
  std::array<std::byte, 128> tma_descriptor(const TmaTensor& tensor) const override {
    return driver_->tma_descriptor(tensor);
  }
  double time_ms(const std::function<void()>& fn) const override { return driver_->time_ms(fn); }
  std::shared_ptr<const CudaProgram> load(const CudaGemmSpec& spec) const override {
    return std::make_shared<GpuProgram>(driver_, spec);
  }
  std::shared_ptr<const CudaProgram> load_source(const std::string& code, const std::string& kernel) const override {
    return std::make_shared<GpuProgram>(driver_, code, kernel, target_);
  }

 private:
  std::shared_ptr<const CudaDriver> driver_;
  CudaDeviceInfo device_;
  CudaTarget target_;
};
}  // namespace

std::shared_ptr<const CudaBackend> make_gpu_backend(const std::string& target) {
  return std::make_shared<GpuBackend>(target);
}

}  // namespace tessera
