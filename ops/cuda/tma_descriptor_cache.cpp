#include "ops/cuda/tma_descriptor_cache.hpp"

#include <algorithm>

#include "ops/cuda/cuda_backend.hpp"

namespace tessera {

namespace {
bool same(const TmaTensor& x, const TmaTensor& y) {
  return x.global == y.global && x.element_bytes == y.element_bytes && x.dims == y.dims &&
         x.stride_bytes == y.stride_bytes && x.box == y.box && x.swizzle_bytes == y.swizzle_bytes;
}
}  // namespace

std::array<std::byte, 128> TmaDescriptorCache::get(const CudaBackend& backend, const TmaTensor& tensor) {
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(kept_.begin(), kept_.end(), [&](const auto& k) { return same(k.first, tensor); });
    if (it != kept_.end()) {
      ++hits_;
      return it->second;
    }
  }
  // Encoded outside the lock; a tensor two threads encode at once is kept twice at worst.
  const std::array<std::byte, 128> descriptor = backend.tma_descriptor(tensor);
  std::lock_guard lock(mutex_);
  ++misses_;
  if (kept_.size() == kKept) kept_.erase(kept_.begin());
  kept_.emplace_back(tensor, descriptor);
  return descriptor;
}

std::uint64_t TmaDescriptorCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

std::uint64_t TmaDescriptorCache::misses() const {
  std::lock_guard lock(mutex_);
  return misses_;
}

}  // namespace tessera
