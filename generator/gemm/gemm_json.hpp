// GEMM's JSON: signatures, CPU and CUDA configs and specs (canonical specs, records, libraries, the CLI).
// Apart from the types, whose headers are public and so free of the JSON library.
#pragma once

#include <nlohmann/json.hpp>

#include "generator/core/kernel_spec.hpp"
#include "generator/gemm/cpu_gemm_spec.hpp"
#include "generator/gemm/cuda_gemm_spec.hpp"

namespace tessera {

nlohmann::json to_json(const GemmSignature& value);
nlohmann::json to_json(const CpuGemmConfig& value);
nlohmann::json to_json(const CudaGemmConfig& value);
nlohmann::json to_json(const CpuGemmSpec& value);
nlohmann::json to_json(const CudaGemmSpec& value);

// Each parses and validates; throws InvalidArgument (malformed) or ConfigError (an invalid combination).
template <>
GemmSignature from_json<GemmSignature>(const nlohmann::json& j);
template <>
CpuGemmConfig from_json<CpuGemmConfig>(const nlohmann::json& j);
template <>
CudaGemmConfig from_json<CudaGemmConfig>(const nlohmann::json& j);
template <>
CpuGemmSpec from_json<CpuGemmSpec>(const nlohmann::json& j);
template <>
CudaGemmSpec from_json<CudaGemmSpec>(const nlohmann::json& j);

}  // namespace tessera
