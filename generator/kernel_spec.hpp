// KernelSpec: {problem signature, config, target}, the unit of compilation, caching, measurement and naming.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "generator/config.hpp"
#include "generator/gemm_problem.hpp"
#include "generator/target.hpp"

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

struct KernelSpec {
  GemmSignature signature;
  CpuGemmConfig config;
  Target target;

  // Canonical JSON: keys sorted, no whitespace; equal specs give equal text on every machine.
  nlohmann::json to_json() const;
  std::string canonical_json() const { return to_json().dump(); }
  // Parses and validates; throws InvalidArgument (malformed) or ConfigError (invalid combination).
  static KernelSpec from_json(const nlohmann::json& j);
  // XXH3-128 of the canonical JSON.
  Hash128 hash() const;
  // A procedural name that is a valid C symbol, e.g. gemm_f32_rrzr_8x32x192_ab_avx512_1a2b3c4d.
  std::string name() const;
};

}  // namespace tessera
