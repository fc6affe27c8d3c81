// The in-memory kernel cache: spec hash → built kernel. Concurrent requests for a new key build it once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "generator/core/kernel_spec.hpp"

namespace tessera {

struct KernelCacheStats {
  std::uint64_t hits = 0, misses = 0, builds = 0, failures = 0;
};

template <class Kernel>
class KernelCache {
 public:
  using Ptr = std::shared_ptr<const Kernel>;

  // Returns the cached kernel or builds it; while one thread builds, others asking for the same key wait for
  // that build. A failed build is not cached: every waiter gets its exception, and a later request retries.
  Ptr get_or_build(const Hash128& key, const std::function<Ptr()>& build) {
    std::shared_future<Ptr> future;
    std::promise<Ptr> promise;
    bool builder = false;
    {
      std::lock_guard lock(mutex_);
      auto it = entries_.find(key);
      if (it != entries_.end()) {
        ++stats_.hits;
        future = it->second;
      } else {
        ++stats_.misses;
        future = promise.get_future().share();
        entries_.emplace(key, future);
        builder = true;
      }
    }
    if (!builder) return future.get();
    try {
      Ptr kernel = build();
      {
        std::lock_guard lock(mutex_);
        ++stats_.builds;
      }
      promise.set_value(kernel);
      return kernel;
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        ++stats_.failures;
        entries_.erase(key);
      }
      promise.set_exception(std::current_exception());
      throw;
    }
  }

  KernelCacheStats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<Hash128, std::shared_future<Ptr>, Hash128Hasher> entries_;
  KernelCacheStats stats_;
};

}  // namespace tessera
