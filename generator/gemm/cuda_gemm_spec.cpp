#include "generator/gemm/cuda_gemm_spec.hpp"

#include <fmt/format.h>

#include "generator/core/error.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/gemm/gemm_naming.hpp"

namespace tessera {

namespace {
constexpr int kCudaSpecVersion = 1;
}  // namespace

KernelSpec CudaGemmSpec::generic() const {
  return {"gemm", kCudaSpecVersion, to_json(signature), to_json(config), target.str()};
}

nlohmann::json to_json(const CudaGemmSpec& spec) { return to_json(spec.generic()); }
Hash128 CudaGemmSpec::hash() const { return generic().hash(); }
std::string CudaGemmSpec::canonical_json() const { return generic().canonical_json(); }

template <>
CudaGemmSpec from_json<CudaGemmSpec>(const nlohmann::json& j) {
  const KernelSpec generic = KernelSpec::from_json(j, "gemm", kCudaSpecVersion);
  CudaGemmSpec spec = parse_spec_part([&] {
    return CudaGemmSpec{from_json<GemmSignature>(generic.signature), from_json<CudaGemmConfig>(generic.config),
                        CudaTarget::parse(generic.target)};
  });
  validate(spec.signature, spec.config, spec.target);
  return spec;
}

std::string CudaGemmSpec::name() const {
  const auto& c = config;
  const std::string split = (c.split_k > 1    ? fmt::format("_sk{}", c.split_k)
                             : c.stream_k > 0 ? fmt::format("_stk{}", c.stream_k) +
                                                    (c.stream_k_waves > 0 ? fmt::format("h{}", c.stream_k_waves) : "")
                                              : "") +
                            (c.tma_store ? "_tmas" : "") +
                            (c.cluster_m * c.cluster_n > 1 ? fmt::format("_cl{}x{}", c.cluster_m, c.cluster_n) : "");
  return fmt::format("gemm_{}_{}_{}{}x{}x{}_w{}x{}_s{}{}_{}_sm{}{}_{}", types_tag(signature), layouts_tag(signature),
                     c.math == CudaMath::Simt    ? "simt"
                     : c.math == CudaMath::Wgmma ? "wg"
                                                 : "tc",
                     c.block_m, c.block_n, c.block_k, c.warp_m, c.warp_n, c.stages, split, epilogue_tag(signature),
                     target.sm, target.arch_specific ? "a" : "", hash().hex().substr(0, 8));
}

}  // namespace tessera
