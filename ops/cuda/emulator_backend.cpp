// The CUDA backend in the SIMT emulator: the kernel's source compiled for the host, "device" memory is host memory,
// and every launch is checked against the extents of the buffers it was given.
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "ops/cuda/cuda_backend.hpp"

namespace tessera {

namespace {
class EmulatedProgram : public CudaProgram {
 public:
  EmulatedProgram(const CudaGemmSpec& spec, const EmuOptions& options) : options_(options) {
    validate(spec.signature, spec.config, spec.target);
    build.spec = spec;
    build.source = emit_cuda(spec);
    module_ = EmuModule::compile(build.source.code, build.source.kernel);
    report.shared_bytes = build.source.shared_bytes;
    report.compile_ms = module_->compile_ms();
  }
  EmulatedProgram(const std::string& code, const std::string& kernel, const EmuOptions& options)
      : options_(options), module_(EmuModule::compile(code, kernel)) {
    report.compile_ms = module_->compile_ms();
  }
  void launch(const std::string& kernel, unsigned grid_x, unsigned grid_z, unsigned block, unsigned shared_bytes,
              std::span<const std::byte> params, const std::vector<EmuMemoryRange>& extents) const override {
    EmuLaunch launch;
    launch.kernel = kernel;
    launch.grid_x = grid_x;
    launch.grid_z = grid_z;
    launch.block = block;
    launch.shared_bytes = shared_bytes;
    launch.params.assign(params.begin(), params.end());
    launch.global = extents;
    module_->launch(launch, options_);
  }

 private:
  EmuOptions options_;
  std::shared_ptr<const EmuModule> module_;
};

class EmulatorBackend : public CudaBackend {
 public:
  EmulatorBackend(const std::string& text, const EmuOptions& options)
      : target_(CudaTarget::parse(text)), options_(options) {}
  const CudaTarget& target() const override { return target_; }
  std::string device_name() const override { return "SIMT emulator (" + target_.arch() + ")"; }
  std::int64_t l2_bytes() const override { return 40 << 20; }
  std::uint64_t allocate(std::size_t bytes) const override {
    void* memory = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    if (!memory) throw std::bad_alloc();
    return reinterpret_cast<std::uint64_t>(memory);
  }
  void free(std::uint64_t address) const override { std::free(reinterpret_cast<void*>(address)); }
  void copy_to_device(std::uint64_t dst, const void* src, std::size_t bytes) const override {
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  }
  void copy_to_host(void* dst, std::uint64_t src, std::size_t bytes) const override {
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  }
  void synchronize() const override {}
  std::array<std::byte, 128> tma_descriptor(const TmaTensor& tensor) const override {
    return emulated_tma_descriptor(tensor);
  }
  double time_ms(const std::function<void()>& fn) const override {
    const auto start = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  std::shared_ptr<const CudaProgram> load(const CudaGemmSpec& spec) const override {
    return std::make_shared<EmulatedProgram>(spec, options_);
  }
  std::shared_ptr<const CudaProgram> load_source(const std::string& code, const std::string& kernel) const override {
    return std::make_shared<EmulatedProgram>(code, kernel, options_);
  }

 private:
  CudaTarget target_;
  EmuOptions options_;
};
}  // namespace

std::shared_ptr<const CudaBackend> make_emulator_backend(const std::string& target, const EmuOptions& options) {
  return std::make_shared<EmulatorBackend>(target, options);
}

}  // namespace tessera
