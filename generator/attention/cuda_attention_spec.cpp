#include "generator/attention/cuda_attention_spec.hpp"

#include <fmt/format.h>

#include "generator/core/error.hpp"

namespace tessera {

namespace {
constexpr int kSpecVersion = 1;
}  // namespace

CudaAttentionConfig CudaAttentionConfig::default_for(const AttentionProblem& problem, const CudaTarget&) {
  CudaAttentionConfig c;
  c.block_kv = problem.signature.head_dim_qk <= 64 ? 64 : 32;
  return c;
}

nlohmann::json CudaAttentionConfig::to_json() const {
  return {{"block_kv", block_kv}, {"warps", warps}, {"align", align}};
}

void validate(const AttentionSignature& s, const CudaAttentionConfig& c, const CudaTarget& target) {
  s.check();
  if (s.dtype != DType::f16 && s.dtype != DType::bf16)
    throw ConfigError(fmt::format("the CUDA attention kernel takes f16 or bf16 tensors, not {}", dtype_name(s.dtype)));
  const std::int64_t d = s.head_dim_qk;
  if (d != 32 && d != 64 && d != 96 && d != 128)
    throw ConfigError(fmt::format("the CUDA attention kernel has head_dim 32, 64, 96 or 128, not {}", d));
  if (s.head_dim_v != d) throw ConfigError("the CUDA attention kernel needs head_dim_v equal to head_dim");
  if (!(s.q_unit_d && s.k_unit_d && s.v_unit_d && s.o_unit_d))
    throw ConfigError("the CUDA attention kernel needs unit strides along the head dimension");
  if (s.score_mod.tensors().size() > 4 || s.score_mod.scalars().size() > 8)
    throw ConfigError("the CUDA attention kernel takes score modifiers of at most 4 tensors and 8 scalars");
  if (c.block_kv < 16 || c.block_kv % 16 != 0 || c.block_kv > 128)
    throw ConfigError(fmt::format("block_kv = {} must be a multiple of 16 in [16, 128]", c.block_kv));
  if (c.warps < 1 || c.warps > 8) throw ConfigError(fmt::format("warps = {} must be in [1, 8]", c.warps));
  if (c.align != 1 && c.align != 2 && c.align != 4 && c.align != 8)
    throw ConfigError(fmt::format("align = {} must be 1, 2, 4 or 8", c.align));
  // Each thread copies whole 16-byte chunks of every tile.
  if ((16 * c.warps * d / 8) % c.threads() != 0 || (c.block_kv * d / 8) % c.threads() != 0)
    throw ConfigError(fmt::format("{} threads do not divide the tiles' 16-byte chunks", c.threads()));
  const int limit = target.max_shared_per_block > 0 ? target.max_shared_per_block : 48 << 10;
  if (c.shared_bytes(s) > limit)
    throw ConfigError(fmt::format("{} bytes of shared memory exceed {}'s {}", c.shared_bytes(s), target.arch(), limit));
}

KernelSpec CudaAttentionSpec::generic() const {
  return {"attention", kSpecVersion, signature.to_json(), config.to_json(), target.str()};
}

std::string CudaAttentionSpec::name() const {
  return fmt::format("flash_attention_{}_d{}{}{}_bc{}_w{}_a{}_{}_{}", dtype_name(signature.dtype),
                     signature.head_dim_qk, signature.causal ? "_causal" : "", signature.lse ? "_lse" : "",
                     config.block_kv, config.warps, config.align, target.arch(), hash().hex().substr(0, 8));
}

}  // namespace tessera
