// Timing a call with an operand cold: evicted from every cache level before each call, as a layer's weights arrive
// from memory. The tuner's --cold-b and tessera-bench's --cold-b time calls this way.
#pragma once

#include <cstddef>
#include <functional>

namespace tessera {

// Flushes [data, data + bytes) from every cache level (clflush of each line, then a fence).
void evict_from_caches(const void* data, std::size_t bytes);

// Seconds of `calls` calls, each after evicting [data, data + bytes); the evictions are not timed.
double cold_call_seconds(const std::function<void()>& call, int calls, const void* data, std::size_t bytes);

}  // namespace tessera
