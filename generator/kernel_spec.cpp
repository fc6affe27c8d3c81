#include "generator/kernel_spec.hpp"

#include <fmt/format.h>

#include "generator/error.hpp"
#include "generator/spec_naming.hpp"

namespace tessera {

namespace {
constexpr int kSpecVersion = 3;  // 2: pack_a, pack_b; 3: fixed sizes
}  // namespace

std::string Hash128::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

nlohmann::json KernelSpec::to_json() const {
  return {{"version", kSpecVersion},
          {"op", "gemm"},
          {"signature", signature.to_json()},
          {"config", config.to_json()},
          {"target", target.str()}};
}

KernelSpec KernelSpec::from_json(const nlohmann::json& j) {
  KernelSpec spec;
  try {
    if (j.at("version").get<int>() != kSpecVersion)
      throw InvalidArgument("spec.version", fmt::format("must be {}", kSpecVersion));
    if (j.at("op").get<std::string>() != "gemm") throw InvalidArgument("spec.op", "must be gemm");
    spec.signature = GemmSignature::from_json(j.at("signature"));
    spec.config = CpuGemmConfig::from_json(j.at("config"));
    spec.target = Target::parse(j.at("target").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("spec", std::string("malformed JSON: ") + e.what());
  }
  validate(spec.signature, spec.config, spec.target);
  return spec;
}

Hash128 KernelSpec::hash() const { return hash_text(canonical_json()); }

std::string KernelSpec::name() const {
  const std::string isa = target.isa == CpuIsa::Avx512 ? "avx512" : "avx2";
  const std::string fixed =
      config.fixed() ? fmt::format("_fix{}x{}x{}", config.fixed_m, config.fixed_n, config.fixed_k) : "";
  const std::string packing = config.pack_a && config.pack_b ? ""
                              : config.pack_a                ? "_ub"
                              : config.pack_b                ? "_ua"
                                                             : "_uab";
  const std::string kind = config.transpose ? "_t" : "";
  return fmt::format("gemm_{}_{}_{}x{}x{}{}{}{}_{}_{}_{}", types_tag(signature), layouts_tag(signature), config.mr,
                     config.nr, config.kc, packing, fixed, kind, epilogue_tag(signature), isa,
                     hash().hex().substr(0, 8));
}

}  // namespace tessera
