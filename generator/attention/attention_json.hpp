// Attention's JSON: signatures, CPU and CUDA configs and specs.
// Apart from the types, whose headers are public and so free of the JSON library.
#pragma once

#include <nlohmann/json.hpp>

#include "generator/attention/cpu_attention_spec.hpp"
#include "generator/attention/cuda_attention_spec.hpp"
#include "generator/core/kernel_spec.hpp"

namespace tessera {

nlohmann::json to_json(const AttentionSignature& value);
nlohmann::json to_json(const CpuAttentionConfig& value);
nlohmann::json to_json(const CudaAttentionConfig& value);
nlohmann::json to_json(const CpuAttentionSpec& value);
nlohmann::json to_json(const CudaAttentionSpec& value);

// Each parses and validates; throws InvalidArgument (malformed) or ConfigError (an invalid combination).
template <>
AttentionSignature from_json<AttentionSignature>(const nlohmann::json& j);
template <>
CpuAttentionConfig from_json<CpuAttentionConfig>(const nlohmann::json& j);
template <>
CpuAttentionSpec from_json<CpuAttentionSpec>(const nlohmann::json& j);

}  // namespace tessera
