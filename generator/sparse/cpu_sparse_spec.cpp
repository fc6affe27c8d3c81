#include "generator/sparse/cpu_sparse_spec.hpp"

#include <fmt/format.h>

namespace tessera {

namespace {
constexpr int kSpecVersion = 1;
const char* isa_tag(const CpuTarget& t) { return t.isa == CpuIsa::Avx512 ? "avx512" : "avx2"; }
}  // namespace

KernelSpec CpuSpmmSpec::generic() const {
  return {"spmm", kSpecVersion, signature.to_json(), config.to_json(), target.str()};
}

CpuSpmmSpec CpuSpmmSpec::from_json(const nlohmann::json& j) {
  const KernelSpec generic = KernelSpec::from_json(j, "spmm", kSpecVersion);
  CpuSpmmSpec spec = parse_spec_part([&] {
    return CpuSpmmSpec{SpmmSignature::from_json(generic.signature), CpuSpmmConfig::from_json(generic.config),
                       CpuTarget::parse(generic.target)};
  });
  validate(spec.signature, spec.config, spec.target);
  return spec;
}

std::string CpuSpmmSpec::name() const {
  return fmt::format("spmm_{}_nv{}x{}_{}_{}", signature.a.tag(), config.nv, config.chains, isa_tag(target),
                     hash().hex().substr(0, 8));
}

KernelSpec CpuSddmmSpec::generic() const {
  return {"sddmm", kSpecVersion, signature.to_json(), config.to_json(), target.str()};
}

CpuSddmmSpec CpuSddmmSpec::from_json(const nlohmann::json& j) {
  const KernelSpec generic = KernelSpec::from_json(j, "sddmm", kSpecVersion);
  CpuSddmmSpec spec = parse_spec_part([&] {
    return CpuSddmmSpec{SddmmSignature::from_json(generic.signature), CpuSddmmConfig::from_json(generic.config),
                        CpuTarget::parse(generic.target)};
  });
  validate(spec.signature, spec.config, spec.target);
  return spec;
}

std::string CpuSddmmSpec::name() const {
  return fmt::format("sddmm_{}_c{}u{}_{}_{}", signature.pattern.tag(), config.cols, config.unroll, isa_tag(target),
                     hash().hex().substr(0, 8));
}

}  // namespace tessera
