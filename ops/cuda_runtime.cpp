#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "cuda_launch.hpp"
#include "gemm_binding.hpp"
#include "jit/cuda_driver.hpp"
#include "jit/cuda_gemm_build.hpp"
#include "tessera/cuda.hpp"

namespace tessera {

struct CudaGemmKernel::Compiled {
  CudaGemmBuild build;
  CudaKernelReport report;
  std::shared_ptr<const CudaDriver> driver;
  std::shared_ptr<CudaModule> module;
};

struct CudaRuntime::Impl {
  std::shared_ptr<const CudaDriver> driver;
  CudaTarget target;
  CudaDeviceInfo device;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const CudaGemmKernel::Compiled>> kernels;  // canonical spec → kernel
};

DeviceBuffer::~DeviceBuffer() {
  if (address_) static_cast<const CudaDriver*>(driver_.get())->free(address_);
}

void DeviceBuffer::copy_from_host(const void* src, std::size_t bytes) {
  if (bytes > bytes_) throw InvalidArgument("copy_from_host", "more bytes than the buffer holds");
  static_cast<const CudaDriver*>(driver_.get())->copy_to_device(address_, src, bytes);
}

void DeviceBuffer::copy_to_host(void* dst, std::size_t bytes) const {
  if (bytes > bytes_) throw InvalidArgument("copy_to_host", "more bytes than the buffer holds");
  static_cast<const CudaDriver*>(driver_.get())->copy_to_host(dst, address_, bytes);
}

std::string CudaRuntime::unavailable_reason() { return CudaDriver::unavailable_reason(); }

CudaRuntime::CudaRuntime(const std::string& target) : impl_(std::make_shared<Impl>()) {
  if (!CudaTarget::is_cuda_text(target) || target.starts_with("cuda-emu"))
    throw InvalidArgument("target", "'" + target + "' is not a GPU target (cuda or cuda:sm_XX)");
  impl_->driver = CudaDriver::instance();
  impl_->device = impl_->driver->device(0);
  impl_->target = CudaTarget::parse(target == "cuda" ? fmt::format("cuda:sm_{}", impl_->device.sm) : target);
  const int device_sm = impl_->device.sm, target_sm = impl_->target.sm;
  // CUBINs run on the same major architecture at an equal or newer minor; sm_90a only on sm_90.
  if (device_sm / 10 != target_sm / 10 || device_sm < target_sm)
    throw Unavailable(fmt::format("device 0 ({}) is sm_{}; it cannot run code built for {}", impl_->device.name,
                                  device_sm, impl_->target.arch()));
  impl_->target.sm_count = impl_->device.sm_count;
  impl_->target.max_shared_per_block = impl_->device.max_shared_per_block_optin;
}

CudaRuntime::~CudaRuntime() = default;

const CudaTarget& CudaRuntime::target() const { return impl_->target; }
std::string CudaRuntime::device_name() const { return impl_->device.name; }

CudaGemmKernel CudaRuntime::compile(const GemmProblem& problem, std::optional<CudaGemmConfig> config) {
  const CudaGemmSpec spec{problem.signature, config ? *config : CudaGemmConfig::default_for(problem, impl_->target),
                          impl_->target};
  validate(spec.signature, spec.config, spec.target);
  const std::string key = spec.canonical_json();
  {
    std::lock_guard lock(impl_->mutex);
    if (auto it = impl_->kernels.find(key); it != impl_->kernels.end()) return CudaGemmKernel(it->second);
  }
  auto compiled = std::make_shared<CudaGemmKernel::Compiled>();
  compiled->build = build_cuda_gemm(spec, true);
  const CudaGemmBuild& b = compiled->build;
  compiled->report = {b.gemm.registers,         b.source.shared_bytes + b.gemm.static_shared_bytes,
                      b.gemm.spill_store_bytes, b.gemm.spill_load_bytes,
                      b.gemm.stack_bytes,       b.binary.compile_ms};
  compiled->driver = impl_->driver;
  compiled->module = impl_->driver->load_module(b.binary.cubin);
  std::lock_guard lock(impl_->mutex);
  return CudaGemmKernel(impl_->kernels.emplace(key, std::move(compiled)).first->second);
}

CudaGemmConfig CudaRuntime::default_config(const GemmArgs& device_args) const {
  const GemmBinding binding = bind_gemm(device_args);
  return fit_alignment(CudaGemmConfig::default_for(binding.problem, impl_->target), binding);
}

void CudaRuntime::gemm(const GemmArgs& device_args) {
  compile(describe_gemm(device_args), default_config(device_args)).run(device_args);
}

DeviceBuffer CudaRuntime::allocate(std::size_t bytes) const {
  DeviceBuffer buffer;
  buffer.driver_ = std::shared_ptr<const void>(impl_->driver, impl_->driver.get());
  buffer.address_ = impl_->driver->allocate(bytes);
  buffer.bytes_ = bytes;
  return buffer;
}

void CudaRuntime::synchronize() const { impl_->driver->synchronize(); }
double CudaRuntime::time_ms(const std::function<void()>& fn) const { return impl_->driver->time_ms(fn); }
std::int64_t CudaRuntime::l2_bytes() const { return impl_->device.l2_bytes; }

CudaGemmKernel::CudaGemmKernel(std::shared_ptr<const Compiled> compiled) : compiled_(std::move(compiled)) {}
const CudaGemmSpec& CudaGemmKernel::spec() const { return compiled_->build.spec; }
const CudaKernelReport& CudaGemmKernel::report() const { return compiled_->report; }

void CudaGemmKernel::run(const GemmArgs& device_args) const {
  const GemmBinding binding = bind_gemm(device_args);
  const CudaGemmSpec& spec = compiled_->build.spec;
  if (!(binding.problem.signature == spec.signature))
    throw InvalidArgument("args", "their signature differs from the kernel's (" + spec.name() + ")");
  CudaLaunch launch = plan_cuda_launch(binding, spec);
  if (launch.grid_x == 0 || launch.grid_z == 0) return;
  // Split-K scratch lives as long as the call; the reduction kernel is queued behind the GEMM on the same stream.
  CuDevicePtr workspace = 0;
  if (launch.workspace_bytes > 0) {
    workspace = compiled_->driver->allocate(static_cast<std::size_t>(launch.workspace_bytes));
    launch.params.workspace = reinterpret_cast<float*>(workspace);
  }
  const CudaSource& source = compiled_->build.source;
  compiled_->module->launch(source.kernel, launch.grid_x, 1, launch.grid_z, launch.block, launch.shared_bytes,
                            &launch.params, sizeof launch.params);
  if (launch.reduce_grid)
    compiled_->module->launch(source.reduce_kernel, launch.reduce_grid, 1, 1, launch.reduce_block, 0, &launch.params,
                              sizeof launch.params);
  if (workspace) {
    compiled_->driver->synchronize();
    compiled_->driver->free(workspace);
  }
}

double CudaGemmKernel::time_ms(const GemmArgs& device_args, int repeat) const {
  run(device_args);
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repeat); ++i) times.push_back(compiled_->driver->time_ms([&] { run(device_args); }));
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

}  // namespace tessera
