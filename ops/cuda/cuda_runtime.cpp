#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "generator/core/arith.hpp"
#include "jit/cuda_driver.hpp"
#include "jit/cuda_gemm_build.hpp"
#include "jit/kernel_cache.hpp"
#include "ops/cuda/cuda_backend.hpp"
#include "ops/cuda/cuda_runtime_impl.hpp"
#include "ops/gemm/cuda_gemm_launch.hpp"
#include "ops/gemm/gemm_binding.hpp"
#include "tessera/cuda.hpp"

namespace tessera {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : backend_(std::move(other.backend_)),
      address_(std::exchange(other.address_, 0)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  std::swap(backend_, other.backend_);
  std::swap(address_, other.address_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (address_) backend_->free(address_);
}

void DeviceBuffer::copy_from_host(const void* src, std::size_t bytes) {
  if (bytes > bytes_) throw InvalidArgument("copy_from_host", "more bytes than the buffer holds");
  backend_->copy_to_device(address_, src, bytes);
}

void DeviceBuffer::copy_to_host(void* dst, std::size_t bytes) const {
  if (bytes > bytes_) throw InvalidArgument("copy_to_host", "more bytes than the buffer holds");
  backend_->copy_to_host(dst, address_, bytes);
}

std::string CudaRuntime::unavailable_reason() { return CudaDriver::unavailable_reason(); }

CudaRuntime::CudaRuntime(const std::string& target, const EmuOptions& emulation) : impl_(std::make_shared<Impl>()) {
  if (!CudaTarget::is_cuda_text(target))
    throw InvalidArgument("target", "'" + target + "' is not a CUDA target (cuda, cuda:sm_XX or cuda-emu:sm_XX)");
  impl_->backend = target.starts_with("cuda-emu") ? make_emulator_backend(target, emulation) : make_gpu_backend(target);
}

CudaRuntime::~CudaRuntime() = default;

const CudaTarget& CudaRuntime::target() const { return impl_->backend->target(); }
std::string CudaRuntime::device_name() const { return impl_->backend->device_name(); }
bool CudaRuntime::emulated() const { return impl_->backend->target().emulated; }

CacheStats CudaRuntime::cache_stats() const {
  const KernelCacheStats s = impl_->programs.stats();
  return {s.hits, s.misses, s.builds, s.failures};
}

CudaGemmKernel CudaRuntime::compile(const GemmProblem& problem, std::optional<CudaGemmConfig> config) {
  const CudaTarget& target = impl_->backend->target();
  const CudaGemmSpec spec{problem.signature, config ? *config : CudaGemmConfig::default_for(problem, target), target};
  validate(spec.signature, spec.config, spec.target);
  return CudaGemmKernel(impl_->programs.get_or_build(spec.hash(), [&] { return impl_->backend->load(spec); }),
                        impl_->backend);
}

CudaGemmConfig CudaRuntime::default_config(const GemmArgs& device_args) const {
  const GemmBinding binding = bind_gemm(device_args);
  const CudaTarget& target = impl_->backend->target();
  CudaGemmConfig config = fit_alignment(CudaGemmConfig::default_for(binding.problem, target), binding);
  const int elem = dtype_bytes(binding.problem.signature.a.dtype);
  if (config.math == CudaMath::Wgmma && (config.align_a * elem < 16 || config.align_b * elem < 16)) {
    // TMA needs 16-byte aligned operands: arguments that are not get the mma.sync kernel.
    CudaTarget without_wgmma = target;
    without_wgmma.arch_specific = false;
    config = fit_alignment(CudaGemmConfig::default_for(binding.problem, without_wgmma), binding);
  }
  return config;
}

void CudaRuntime::gemm(const GemmArgs& device_args) {
  compile(describe_gemm(device_args), default_config(device_args)).run(device_args);
}

DeviceBuffer CudaRuntime::allocate(std::size_t bytes) const {
  DeviceBuffer buffer;
  buffer.backend_ = impl_->backend;
  buffer.address_ = impl_->backend->allocate(bytes);
  buffer.bytes_ = bytes;
  return buffer;
}

void CudaRuntime::synchronize() const { impl_->backend->synchronize(); }
double CudaRuntime::time_ms(const std::function<void()>& fn) const { return impl_->backend->time_ms(fn); }
std::int64_t CudaRuntime::l2_bytes() const { return impl_->backend->l2_bytes(); }

CudaGemmKernel::CudaGemmKernel(std::shared_ptr<const CudaProgram> program, std::shared_ptr<const CudaBackend> backend)
    : program_(std::move(program)), backend_(std::move(backend)) {}
const CudaGemmSpec& CudaGemmKernel::spec() const { return program_->build.spec; }
const CudaKernelReport& CudaGemmKernel::report() const { return program_->report; }

void CudaGemmKernel::run(const GemmArgs& device_args) const {
  const GemmBinding binding = bind_gemm(device_args);
  const CudaGemmSpec& spec = program_->build.spec;
  if (!(binding.problem.signature == spec.signature))
    throw InvalidArgument("args", "their signature differs from the kernel's (" + spec.name() + ")");
  CudaLaunch launch = plan_cuda_launch(binding, spec);
  if (launch.grid_x == 0 || launch.grid_z == 0) return;
  std::vector<EmuMemoryRange> extents = operand_extents(binding);
  // Split-K and stream-K scratch lives as long as the call; a reduction kernel is queued behind the GEMM on the same
  // stream.
  std::uint64_t workspace = 0;
  if (launch.workspace_bytes > 0) {
    workspace = backend_->allocate(static_cast<std::size_t>(launch.workspace_bytes));
    launch.params.workspace = reinterpret_cast<float*>(workspace);
    extents.push_back({launch.params.workspace, static_cast<std::size_t>(launch.workspace_bytes)});
    if (launch.flags_offset >= 0) {
      const std::vector<int> zeros(static_cast<std::size_t>(launch.flags_bytes / 4), 0);
      backend_->copy_to_device(workspace + static_cast<std::uint64_t>(launch.flags_offset), zeros.data(),
                               static_cast<std::size_t>(launch.flags_bytes));
      launch.params.tile_flags = reinterpret_cast<int*>(workspace + static_cast<std::uint64_t>(launch.flags_offset));
    }
  }
  TmaDescriptor* maps[3] = {&launch.params.a_map, &launch.params.b_map, &launch.params.d_map};
  for (std::size_t i = 0; i < launch.tma.size(); ++i)
    std::memcpy(maps[i], program_->tma_descriptors.get(*backend_, launch.tma[i]).data(), sizeof(TmaDescriptor));
  const CudaSource& source = program_->build.source;
  try {
    const auto params = std::as_bytes(std::span(&launch.params, 1));
    program_->launch(source.kernel, launch.grid_x, launch.grid_z, launch.block, launch.shared_bytes, params, extents);
    if (launch.reduce_grid)
      program_->launch(source.reduce_kernel, launch.reduce_grid, 1, launch.reduce_block, 0, params, extents);
  } catch (...) {
    if (workspace) backend_->free(workspace);
    throw;
  }
  if (workspace) {
    backend_->synchronize();
    backend_->free(workspace);
  }
}

double CudaGemmKernel::time_ms(const GemmArgs& device_args, int repeat) const {
  run(device_args);
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repeat); ++i) times.push_back(backend_->time_ms([&] { run(device_args); }));
  return median(std::move(times));
}

CudaCode generate_cuda_gemm(const CudaGemmSpec& spec, bool cubin) {
  const CudaGemmBuild build = build_cuda_gemm(spec, cubin);
  return {build.source.code, build.binary.ptx, build.report().dump()};
}

}  // namespace tessera
