// CudaTarget: an NVIDIA architecture a kernel is compiled for, with the limits validation and the cost model need.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

struct CudaTarget {
  int sm = 80;                   // compute capability × 10: 80, 86, 89, 90
  bool arch_specific = false;    // sm_90a: Hopper-only instructions allowed
  bool emulated = false;         // cuda-emu:sm_XX, run on the CPU by the SIMT emulator
  int sm_count = 108;            // of the flagship part of the architecture (A100, RTX 3090, RTX 4090, H100)
  int max_shared_per_block = 0;  // bytes, with the opt-in attribute
  int shared_per_sm = 0;         // bytes
  int registers_per_sm = 65536;
  int max_registers_per_thread = 255;
  int max_threads_per_block = 1024;

  // "sm_80" or "sm_90a": what NVRTC's -arch gets.
  std::string arch() const;
  // "cuda:sm_80", "cuda-emu:sm_80"
  std::string str() const;

  // "cuda:sm_80", "cuda:sm_86", "cuda:sm_89", "cuda:sm_90", "cuda:sm_90a", or the same with "cuda-emu:";
  // throws InvalidArgument naming the known architectures.
  static CudaTarget parse(std::string_view text);
  static bool is_cuda_text(std::string_view text);
  friend bool operator==(const CudaTarget&, const CudaTarget&) = default;
};

}  // namespace tessera
