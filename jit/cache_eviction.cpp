#include "jit/cache_eviction.hpp"

#include <immintrin.h>

#include <chrono>

namespace tessera {

void evict_from_caches(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  for (std::size_t offset = 0; offset < bytes; offset += 64) _mm_clflush(p + offset);
  _mm_mfence();
}

double cold_call_seconds(const std::function<void()>& call, int calls, const void* data, std::size_t bytes) {
  double total = 0;
  for (int i = 0; i < calls; ++i) {
    evict_from_caches(data, bytes);
    const auto start = std::chrono::steady_clock::now();
    call();
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return total;
}

}  // namespace tessera
