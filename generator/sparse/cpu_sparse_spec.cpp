#include "generator/sparse/cpu_sparse_spec.hpp"
#include "generator/sparse/sparse_json.hpp"

#include <fmt/format.h>

namespace tessera {

namespace {
constexpr int kCpuSparseSpecVersion =
    4;  // 2: inner tiles and whole groups store unmasked; 3: edges too; 4: edge vectors by ceiling
const char* isa_tag(const CpuTarget& t) { return t.isa == CpuIsa::Avx512 ? "avx512" : "avx2"; }
}  // namespace

KernelSpec CpuSpmmSpec::generic() const {
  return {"spmm", kCpuSparseSpecVersion, to_json(signature), to_json(config), target.str()};
}

nlohmann::json to_json(const CpuSpmmSpec& spec) { return to_json(spec.generic()); }
Hash128 CpuSpmmSpec::hash() const { return generic().hash(); }

template <>
CpuSpmmSpec from_json<CpuSpmmSpec>(const nlohmann::json& j) {
  const KernelSpec generic = KernelSpec::from_json(j, "spmm", kCpuSparseSpecVersion);
  CpuSpmmSpec spec = parse_spec_part([&] {
    return CpuSpmmSpec{from_json<SpmmSignature>(generic.signature), from_json<CpuSpmmConfig>(generic.config),
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
  return {"sddmm", kCpuSparseSpecVersion, to_json(signature), to_json(config), target.str()};
}

nlohmann::json to_json(const CpuSddmmSpec& spec) { return to_json(spec.generic()); }
Hash128 CpuSddmmSpec::hash() const { return generic().hash(); }

template <>
CpuSddmmSpec from_json<CpuSddmmSpec>(const nlohmann::json& j) {
  const KernelSpec generic = KernelSpec::from_json(j, "sddmm", kCpuSparseSpecVersion);
  CpuSddmmSpec spec = parse_spec_part([&] {
    return CpuSddmmSpec{from_json<SddmmSignature>(generic.signature), from_json<CpuSddmmConfig>(generic.config),
                        CpuTarget::parse(generic.target)};
  });
  validate(spec.signature, spec.config, spec.target);
  return spec;
}

std::string CpuSddmmSpec::name() const {
  return fmt::format("sddmm_{}_c{}u{}{}_{}_{}", signature.pattern.tag(), config.cols, config.unroll,
                     config.k_panel > 0 ? fmt::format("k{}", config.k_panel) : "", isa_tag(target),
                     hash().hex().substr(0, 8));
}

}  // namespace tessera
