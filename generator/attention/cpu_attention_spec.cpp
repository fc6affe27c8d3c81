#include "generator/attention/cpu_attention_spec.hpp"
#include "generator/attention/attention_json.hpp"

#include <fmt/format.h>

namespace tessera {

namespace {
constexpr int kCpuAttentionSpecVersion = 2;  // 2: score groups store unmasked
}  // namespace

KernelSpec CpuAttentionSpec::generic() const {
  return {"attention", kCpuAttentionSpecVersion, to_json(signature), to_json(config), target.str()};
}

nlohmann::json to_json(const CpuAttentionSpec& spec) { return to_json(spec.generic()); }
Hash128 CpuAttentionSpec::hash() const { return generic().hash(); }
std::string CpuAttentionSpec::canonical_json() const { return generic().canonical_json(); }

template <>
CpuAttentionSpec from_json<CpuAttentionSpec>(const nlohmann::json& j) {
  const KernelSpec generic = KernelSpec::from_json(j, "attention", kCpuAttentionSpecVersion);
  CpuAttentionSpec spec = parse_spec_part([&] {
    return CpuAttentionSpec{from_json<AttentionSignature>(generic.signature),
                            from_json<CpuAttentionConfig>(generic.config), CpuTarget::parse(generic.target)};
  });
  validate(spec.signature, spec.config, spec.target);
  return spec;
}

std::string CpuAttentionSpec::name() const {
  const AttentionSignature& s = signature;
  const std::string dims = s.head_dim_qk == s.head_dim_v ? fmt::format("d{}", s.head_dim_qk)
                                                         : fmt::format("d{}v{}", s.head_dim_qk, s.head_dim_v);
  const std::string amx = config.amx == CpuAttentionConfig::kAmxTiles      ? "_amx"
                          : config.amx == CpuAttentionConfig::kAmxEmulated ? "_amxemu"
                                                                           : "";
  return fmt::format("attention_{}_{}{}{}{}_{}x{}_{}x{}{}_{}_{}", dtype_name(s.dtype), dims, s.causal ? "_causal" : "",
                     s.score_mod.is_identity() ? "" : "_mod", s.lse ? "_lse" : "", config.block_q, config.block_kv,
                     config.mr, config.nv, amx, target.isa == CpuIsa::Avx512 ? "avx512" : "avx2",
                     hash().hex().substr(0, 8));
}

}  // namespace tessera
