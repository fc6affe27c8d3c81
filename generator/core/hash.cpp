#include "generator/core/hash.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>

namespace tessera {

std::string Hash128::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

void KeyHasher::append(const void* data, std::size_t bytes) {
  if (spill_.empty() && size_ + bytes <= sizeof inline_) {
    std::memcpy(inline_ + size_, data, bytes);
    size_ += bytes;
    return;
  }
  if (spill_.empty()) spill_.assign(inline_, size_);
  spill_.append(static_cast<const char*>(data), bytes);
}

Hash128 hash_text(std::string_view text) {
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return {h.high64, h.low64};
}

}  // namespace tessera
