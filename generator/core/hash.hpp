// Hash128 and the hashing of texts and keys: spec hashes (XXH3-128 of the canonical JSON) and dispatch keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace tessera {

struct Hash128 {
  std::uint64_t hi = 0, lo = 0;
  std::string hex() const;  // 32 lowercase hex digits
  friend bool operator==(const Hash128&, const Hash128&) = default;
};

struct Hash128Hasher {
  std::size_t operator()(const Hash128& h) const {
    return static_cast<std::size_t>(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ULL));
  }
};

// XXH3-128 of a text (the canonical JSON of a spec).
Hash128 hash_text(std::string_view text);

// A Hash128 of fields appended as bytes, without formatting them: for keys computed on every call. Texts are
// length-prefixed so that field boundaries count.
class KeyHasher {
 public:
  template <class T>
  requires std::is_trivially_copyable_v<T> KeyHasher& add(const T& value) {
    append(&value, sizeof value);
    return *this;
  }
  KeyHasher& add(std::string_view text) {
    add(text.size());
    append(text.data(), text.size());
    return *this;
  }
  Hash128 digest() const { return hash_text(spill_.empty() ? std::string_view(inline_, size_) : spill_); }

 private:
  void append(const void* data, std::size_t bytes);
  char inline_[256];
  std::size_t size_ = 0;
  std::string spill_;  // used once the bytes outgrow inline_
};

}  // namespace tessera
