#include "generator/cuda_gemm_spec.hpp"

#include <fmt/format.h>

#include "generator/error.hpp"
#include "generator/spec_naming.hpp"

namespace tessera {

namespace {
constexpr int kCudaSpecVersion = 1;
}  // namespace

nlohmann::json CudaGemmSpec::to_json() const {
  return {{"version", kCudaSpecVersion},
          {"op", "gemm"},
          {"signature", signature.to_json()},
          {"config", config.to_json()},
          {"target", target.str()}};
}

CudaGemmSpec CudaGemmSpec::from_json(const nlohmann::json& j) {
  CudaGemmSpec spec;
  try {
    if (j.at("version").get<int>() != kCudaSpecVersion)
      throw InvalidArgument("spec.version", fmt::format("must be {}", kCudaSpecVersion));
    if (j.at("op").get<std::string>() != "gemm") throw InvalidArgument("spec.op", "must be gemm");
    spec.signature = GemmSignature::from_json(j.at("signature"));
    spec.config = CudaGemmConfig::from_json(j.at("config"));
    spec.target = CudaTarget::parse(j.at("target").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("spec", std::string("malformed JSON: ") + e.what());
  }
  validate(spec.signature, spec.config, spec.target);
  return spec;
}

Hash128 CudaGemmSpec::hash() const { return hash_text(canonical_json()); }

std::string CudaGemmSpec::name() const {
  const auto& c = config;
  const std::string split = c.split_k > 1 ? fmt::format("_sk{}", c.split_k) : "";
  return fmt::format("gemm_{}_{}_{}{}x{}x{}_w{}x{}_s{}{}_{}_sm{}{}_{}", types_tag(signature), layouts_tag(signature),
                     c.math == CudaMath::Simt ? "simt" : "tc", c.block_m, c.block_n, c.block_k, c.warp_m, c.warp_n,
                     c.stages, split, epilogue_tag(signature), target.sm, target.arch_specific ? "a" : "",
                     hash().hex().substr(0, 8));
}

}  // namespace tessera
