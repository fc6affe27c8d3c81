// tessera on an NVIDIA GPU: kernels generated from the same GemmArgs vocabulary, compiled by NVRTC for the device's
// architecture and launched through the lazily loaded driver; or the same kernels in the SIMT emulator on the CPU
// (target "cuda-emu:sm_XX"), which checks them. Tensors hold device addresses (host addresses in the emulator).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "generator/attention/cuda_attention_spec.hpp"
#include "generator/core/emulation_options.hpp"
#include "generator/gemm/cuda_gemm_config.hpp"
#include "generator/gemm/cuda_gemm_spec.hpp"
#include "generator/sparse/cuda_sparse_spec.hpp"
#include "tessera/sparse.hpp"
#include "tessera/tessera.hpp"

namespace tessera {

class CudaBackend;
class CudaProgram;

struct CudaKernelReport {
  int registers = 0;
  std::int64_t shared_bytes = 0;
  int spill_store_bytes = 0, spill_load_bytes = 0, stack_bytes = 0;
  double compile_ms = 0;
};

// Device memory owned by a CudaRuntime allocation; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* data() const { return reinterpret_cast<void*>(address_); }
  std::size_t bytes() const { return bytes_; }
  void copy_from_host(const void* src, std::size_t bytes);
  void copy_to_host(void* dst, std::size_t bytes) const;

 private:
  friend class CudaRuntime;
  std::shared_ptr<const CudaBackend> backend_;
  std::uint64_t address_ = 0;
  std::size_t bytes_ = 0;
};

class CudaGemmKernel {
 public:
  const CudaGemmSpec& spec() const;
  std::string name() const { return spec().name(); }
  const CudaKernelReport& report() const;
  // Runs on device tensors (their data pointers are device addresses); validates them like the CPU path, plus the
  // kernel's alignment claims. Asynchronous on the default stream.
  void run(const GemmArgs& device_args) const;
  // Median milliseconds of `repeat` runs, measured with CUDA events after a warm-up run.
  double time_ms(const GemmArgs& device_args, int repeat) const;

 private:
  friend class CudaRuntime;
  CudaGemmKernel(std::shared_ptr<const CudaProgram> program, std::shared_ptr<const CudaBackend> backend);
  std::shared_ptr<const CudaProgram> program_;
  std::shared_ptr<const CudaBackend> backend_;
};

// What CudaRuntime::attention launches for some arguments.
struct CudaAttentionLaunchPlan {
  std::string kernel;
  CudaAttentionConfig config;
  int kv_splits = 1;                 // copies of each query block over disjoint keys, merged by a second kernel
  std::int64_t workspace_bytes = 0;  // device memory beyond the tensors: varlen offsets, split keys' partial rows
  // Decoding (one query a head) with grouped heads: a KV head's query heads run as the rows of one block, which
  // reads K and V once for all of them.
  bool stacked_heads = false;
};

class CudaRuntime {
 public:
  // "cuda" (the device's own architecture) or "cuda:sm_80" etc. Throws Unavailable with the reason when there is
  // no usable driver or device, or the device cannot run code for that architecture. "cuda-emu:sm_80" etc. runs
  // the kernels in the SIMT emulator with `emulation` options (no GPU, no NVRTC needed).
  explicit CudaRuntime(const std::string& target = "cuda", const EmuOptions& emulation = {});
  ~CudaRuntime();
  CudaRuntime(const CudaRuntime&) = delete;
  CudaRuntime& operator=(const CudaRuntime&) = delete;

  const CudaTarget& target() const;
  std::string device_name() const;

  // A kernel for the problem; the default config fits the problem and the target. Compiled once per spec.
  CudaGemmKernel compile(const GemmProblem& problem, std::optional<CudaGemmConfig> config = std::nullopt);
  // The default config for these arguments: fitted to the problem, the target and the arguments' alignment.
  CudaGemmConfig default_config(const GemmArgs& device_args) const;
  // describe + compile (with the default config) + run.
  void gemm(const GemmArgs& device_args);
  // Fused attention (FlashAttention-2's forward pass) on device tensors: f16 or bf16 Q, K, V and O with unit
  // head-dimension strides, head_dim 32, 64, 96 or 128, GQA, variable lengths, causal, LSE, score modifiers.
  // Validates like the CPU path; asynchronous on the default stream.
  void attention(const AttentionArgs& device_args, std::optional<CudaAttentionConfig> config = std::nullopt);
  // The kernel, config, key splits and device workspace attention(device_args, config) would launch with.
  CudaAttentionLaunchPlan attention_plan(const AttentionArgs& device_args,
                                         std::optional<CudaAttentionConfig> config = std::nullopt) const;
  // Milliseconds of `repeat` attention calls (median), after a warm-up call.
  double attention_ms(const AttentionArgs& device_args, int repeat,
                      std::optional<CudaAttentionConfig> config = std::nullopt);
  // SpMM and SDDMM on device memory (Sputnik's CSR kernels): the pattern's arrays and the dense operands in device
  // memory (host memory in the emulator); args.plan is required, made by SparsePlan::inspect from the host arrays
  // of the same pattern (the device arrays cannot be read to check them). Values and B (and A) f32, f16 or bf16,
  // row-major; D f32 row-major. Asynchronous on the default stream.
  void spmm(const SpmmArgs& device_args, std::optional<CudaSparseConfig> config = std::nullopt);
  double spmm_ms(const SpmmArgs& device_args, int repeat, std::optional<CudaSparseConfig> config = std::nullopt);
  void sddmm(const SddmmArgs& device_args, std::optional<CudaSparseConfig> config = std::nullopt);
  double sddmm_ms(const SddmmArgs& device_args, int repeat, std::optional<CudaSparseConfig> config = std::nullopt);
  DeviceBuffer allocate(std::size_t bytes) const;
  void synchronize() const;
  // GPU milliseconds of the work fn enqueues (CUDA events), e.g. to time another library on the same device.
  double time_ms(const std::function<void()>& fn) const;
  std::int64_t l2_bytes() const;

  bool emulated() const;
  // How the runtime's kernel cache has answered compile().
  CacheStats cache_stats() const;

  // Empty when a CUDA device can be used here, else why not.
  static std::string unavailable_reason();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// What NVRTC makes of a CUDA GEMM spec, without a GPU: the generated source, the PTX and, with `cubin`, the
// ptxas report as the text of one JSON object (name, arch, threads, registers, shared, spill and stack bytes,
// compile_ms, the PTX's mma/ldmatrix/cp.async counts, the split-K reduction's figures). Validates the spec first.
struct CudaCode {
  std::string source, ptx;
  std::string report;
};
CudaCode generate_cuda_gemm(const CudaGemmSpec& spec, bool cubin = true);
// The same for a CUDA attention spec (the report's keys as GEMM's, without the split-K figures).
CudaCode generate_cuda_attention(const CudaAttentionSpec& spec, bool cubin = true);
// And for the sparse specs.
CudaCode generate_cuda_spmm(const CudaSpmmSpec& spec, bool cubin = true);
CudaCode generate_cuda_sddmm(const CudaSddmmSpec& spec, bool cubin = true);

}  // namespace tessera
