// KernelSpec: the op-tagged unit of compilation, caching, measurement and naming. Every operation's typed spec
// (CpuGemmSpec, CudaGemmSpec, ...) converts to it, so the canonical JSON and the hash are written once for all.
// Internal: it holds JSON; the typed specs only name it.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "generator/core/error.hpp"
#include "generator/core/hash.hpp"

namespace tessera {

struct KernelSpec {
  std::string op;   // "gemm"; each operation names itself
  int version = 0;  // of the op's signature and config JSON on this kind of target
  nlohmann::json signature, config;
  std::string target;  // canonical target text: "cpu:avx512", "cuda:sm_80"

  // Canonical JSON (to_json below): keys sorted, no whitespace; equal specs give equal text on every machine.
  std::string canonical_json() const;
  Hash128 hash() const { return hash_text(canonical_json()); }
  // The envelope of a spec of `op` at `version`; throws InvalidArgument naming what is malformed or different.
  // The op's own parser reads signature, config and target from it.
  static KernelSpec from_json(const nlohmann::json& j, std::string_view op, int version);
};

nlohmann::json to_json(const KernelSpec& spec);

// A signature's, config's or spec's JSON parsed back: each op's JSON header (gemm_json.hpp, attention_json.hpp,
// sparse_json.hpp) declares the types it reads. The types' own headers stay free of the JSON library, so that the
// public headers that include them are installable.
template <class T>
T from_json(const nlohmann::json& j);

// An integer of a spec's JSON: a JSON integer in T's range, else InvalidArgument("spec") naming `what`. (nlohmann's
// get<int>() converts any number with a cast: undefined behaviour for 1e40, a silent wrap for 2^40.)
template <class T>
T integer_value(const nlohmann::json& value, std::string_view what) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<std::uint64_t>();
    if (v <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(v);
  } else if (value.is_number_integer()) {
    const auto v = value.get<std::int64_t>();
    if (v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max()) return static_cast<T>(v);
  }
  throw InvalidArgument("spec",
                        std::string(what) + " must be an integer in the range of its type, not " + value.dump());
}

template <class T>
T integer_at(const nlohmann::json& j, const char* key) {
  return integer_value<T>(j.at(key), key);
}

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
