// SpMM's and SDDMM's JSON: sparse operands, pattern statistics, signatures, CPU and CUDA configs and specs.
// Apart from the types, whose headers are public and so free of the JSON library.
#pragma once

#include <nlohmann/json.hpp>

#include "generator/core/kernel_spec.hpp"
#include "generator/core/sparse_format.hpp"
#include "generator/sparse/cpu_sparse_spec.hpp"
#include "generator/sparse/cuda_sparse_spec.hpp"
#include "generator/sparse/sparse_problem.hpp"

namespace tessera {

nlohmann::json to_json(const SparseSignature& value);
nlohmann::json to_json(const PatternStats& value);
nlohmann::json to_json(const SpmmSignature& value);
nlohmann::json to_json(const SddmmSignature& value);
nlohmann::json to_json(const CpuSpmmConfig& value);
nlohmann::json to_json(const CpuSddmmConfig& value);
nlohmann::json to_json(const CudaSparseConfig& value);
nlohmann::json to_json(const CpuSpmmSpec& value);
nlohmann::json to_json(const CpuSddmmSpec& value);
nlohmann::json to_json(const CudaSpmmSpec& value);
nlohmann::json to_json(const CudaSddmmSpec& value);

// Each parses and validates; throws InvalidArgument (malformed) or ConfigError (an invalid combination).
template <>
SparseSignature from_json<SparseSignature>(const nlohmann::json& j);
template <>
SpmmSignature from_json<SpmmSignature>(const nlohmann::json& j);
template <>
SddmmSignature from_json<SddmmSignature>(const nlohmann::json& j);
template <>
CpuSpmmConfig from_json<CpuSpmmConfig>(const nlohmann::json& j);
template <>
CpuSddmmConfig from_json<CpuSddmmConfig>(const nlohmann::json& j);
template <>
CpuSpmmSpec from_json<CpuSpmmSpec>(const nlohmann::json& j);
template <>
CpuSddmmSpec from_json<CpuSddmmSpec>(const nlohmann::json& j);

}  // namespace tessera
