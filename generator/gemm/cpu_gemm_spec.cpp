#include "generator/gemm/cpu_gemm_spec.hpp"

#include <fmt/format.h>

#include "generator/core/error.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/gemm/gemm_naming.hpp"

namespace tessera {

namespace {
constexpr int kCpuGemmSpecVersion = 3;  // 2: pack_a, pack_b; 3: fixed sizes
}  // namespace

std::string_view CpuGemmSpec::required_extension() const {
  if (signature.a.dtype == DType::bf16) return "avx512bf16";
  if (is_int8(signature)) return target.isa == CpuIsa::Avx512 ? "avx512vnni" : "avxvnni";
  return "";
}

KernelSpec CpuGemmSpec::generic() const {
  return {"gemm", kCpuGemmSpecVersion, to_json(signature), to_json(config), target.str()};
}

nlohmann::json to_json(const CpuGemmSpec& spec) { return to_json(spec.generic()); }
Hash128 CpuGemmSpec::hash() const { return generic().hash(); }
std::string CpuGemmSpec::canonical_json() const { return generic().canonical_json(); }

template <>
CpuGemmSpec from_json<CpuGemmSpec>(const nlohmann::json& j) {
  const KernelSpec generic = KernelSpec::from_json(j, "gemm", kCpuGemmSpecVersion);
  CpuGemmSpec spec = parse_spec_part([&] {
    return CpuGemmSpec{from_json<GemmSignature>(generic.signature), from_json<CpuGemmConfig>(generic.config),
                       CpuTarget::parse(generic.target)};
  });
  validate(spec.signature, spec.config, spec.target);
  return spec;
}

std::string CpuGemmSpec::name() const {
  const std::string isa = target.isa == CpuIsa::Avx512 ? "avx512" : "avx2";
  const std::string fixed =
      config.fixed() ? fmt::format("_fix{}x{}x{}", config.fixed_m, config.fixed_n, config.fixed_k) : "";
  const std::string packing = config.pack_a && config.pack_b ? ""
                              : config.pack_a                ? "_ub"
                              : config.pack_b                ? "_ua"
                                                             : "_uab";
  const std::string kind =
      std::string(config.transpose ? "_t" : "") + (config.amx == CpuGemmConfig::kAmxTiles      ? "_amx"
                                                   : config.amx == CpuGemmConfig::kAmxEmulated ? "_amxemu"
                                                                                               : "");
  return fmt::format("gemm_{}_{}_{}x{}x{}{}{}{}_{}_{}_{}", types_tag(signature), layouts_tag(signature), config.mr,
                     config.nr, config.kc, packing, fixed, kind, epilogue_tag(signature), isa,
                     hash().hex().substr(0, 8));
}

}  // namespace tessera
