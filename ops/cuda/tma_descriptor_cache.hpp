// TMA descriptors kept for the tensors a kernel was last called with: encoding one goes through the driver
// (cuTensorMapEncodeTiled, microseconds), which a small GEMM's call would otherwise pay for A, B and D every time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "jit/tma_tensor.hpp"

namespace tessera {

class CudaBackend;

class TmaDescriptorCache {
 public:
  // The descriptor of `tensor` on `backend`: kept from an earlier call with the same tensor, or encoded now.
  std::array<std::byte, 128> get(const CudaBackend& backend, const TmaTensor& tensor);
  std::uint64_t hits() const;
  std::uint64_t misses() const;

 private:
  static constexpr std::size_t kKept = 16;  // the most recent tensors (A, B and D of a few argument sets)
  mutable std::mutex mutex_;
  std::vector<std::pair<TmaTensor, std::array<std::byte, 128>>> kept_;  // oldest first
  std::uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace tessera
