// KernelSpec: the op-tagged unit of compilation, caching, measurement and naming. Every operation's typed spec
// (CpuGemmSpec, CudaGemmSpec, ...) converts to it, so the canonical JSON and the hash are written once for all.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "generator/core/error.hpp"

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

struct KernelSpec {
  std::string op;   // "gemm"; each operation names itself
  int version = 0;  // of the op's signature and config JSON on this kind of target
  nlohmann::json signature, config;
  std::string target;  // canonical target text: "cpu:avx512", "cuda:sm_80"

  // Canonical JSON: keys sorted, no whitespace; equal specs give equal text on every machine.
  nlohmann::json to_json() const;
  std::string canonical_json() const { return to_json().dump(); }
  Hash128 hash() const { return hash_text(canonical_json()); }
  // The envelope of a spec of `op` at `version`; throws InvalidArgument naming what is malformed or different.
  // The op's own parser reads signature, config and target from it.
  static KernelSpec from_json(const nlohmann::json& j, std::string_view op, int version);
};

// Runs an op's parser of its part of a spec, turning malformed JSON into InvalidArgument("spec", ...).
template <class F>
auto parse_spec_part(F&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("spec", std::string("malformed JSON: ") + e.what());
  }
}

}  // namespace tessera
