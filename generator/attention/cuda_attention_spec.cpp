#include "generator/attention/cuda_attention_spec.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "generator/attention/attention_json.hpp"
#include "generator/core/arith.hpp"
#include "generator/core/config_fields.hpp"
#include "generator/core/error.hpp"

namespace tessera {

namespace {
constexpr int kCudaAttentionSpecVersion = 1;
}  // namespace

CudaAttentionConfig CudaAttentionConfig::mma_sync_default(const AttentionProblem& problem) {
  CudaAttentionConfig c;
  c.block_kv = problem.signature.head_dim_qk <= 64 ? 64 : 32;
  return c;
}

CudaAttentionConfig CudaAttentionConfig::default_for(const AttentionProblem& problem, const CudaTarget& target) {
  const CudaAttentionConfig mma_sync = mma_sync_default(problem);
  const std::int64_t d = problem.signature.head_dim_qk;
  if (!target.arch_specific || target.sm < 90 || (d != 64 && d != 128) || problem.signature.head_dim_v != d ||
      mma_sync.key_splits(problem, target) > 1)
    return mma_sync;
  CudaAttentionConfig c;
  c.wgmma = true;
  c.warps = 8;
  c.block_kv = 128;
  return c;
}

CudaAttentionConfig CudaAttentionConfig::with_overrides(const std::string& text) const {
  static const ConfigFields<CudaAttentionConfig> fields{
      {"block_kv", &CudaAttentionConfig::block_kv}, {"warps", &CudaAttentionConfig::warps},
      {"align", &CudaAttentionConfig::align},       {"kv_splits", &CudaAttentionConfig::kv_splits},
      {"wgmma", &CudaAttentionConfig::wgmma},       {"stages", &CudaAttentionConfig::stages}};
  return with_config_overrides(*this, text, fields);
}

int CudaAttentionConfig::key_splits(const AttentionProblem& p, const CudaTarget& target) const {
  constexpr int kMaxSplits = 128, kMinSplitBlocks = 4;
  const std::int64_t key_blocks = ceil_div(std::max<std::int64_t>(p.seq_kv, 1), block_kv);
  if (wgmma) return 1;
  if (kv_splits > 0) return static_cast<int>(std::min<std::int64_t>(kv_splits, key_blocks));
  const std::int64_t blocks = ceil_div(p.seq_q, block_q()) * p.heads * p.batch;
  const std::int64_t sms = std::max(1, target.sm_count);
  const std::int64_t most = std::min<std::int64_t>(kMaxSplits, key_blocks / kMinSplitBlocks);
  if (blocks <= 0 || blocks * 5 >= sms * 4 || most < 2) return 1;
  const auto fill = [&](std::int64_t s) {
    const std::int64_t n = blocks * s;
    return static_cast<double>(n) / static_cast<double>(ceil_div(n, sms) * sms);
  };
  // Splits that give some split as many key blocks as one fewer would do no good.
  const auto useful = [&](std::int64_t s) { return s == 1 || ceil_div(key_blocks, s) != ceil_div(key_blocks, s - 1); };
  double best = 0;
  for (std::int64_t s = 1; s <= most; ++s)
    if (useful(s)) best = std::max(best, fill(s));
  for (std::int64_t s = 1; s <= most; ++s)
    if (useful(s) && fill(s) >= 0.85 * best) return static_cast<int>(s);
  return 1;
}

std::int64_t CudaAttentionConfig::split_keys(const AttentionProblem& p, int splits) const {
  const std::int64_t key_blocks = ceil_div(std::max<std::int64_t>(p.seq_kv, 1), block_kv);
  return ceil_div(key_blocks, std::max(splits, 1)) * block_kv;
}

nlohmann::json to_json(const CudaAttentionConfig& config) {
  nlohmann::json j{{"block_kv", config.block_kv}, {"warps", config.warps}, {"align", config.align}};
  if (config.kv_splits > 0) j["kv_splits"] = config.kv_splits;
  if (config.wgmma) j["wgmma"] = true, j["stages"] = config.stages;  // absent for mma.sync: its hashes as before
  return j;
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
  if (c.kv_splits < 0 || c.kv_splits > 1024)
    throw ConfigError(fmt::format("kv_splits = {} must be in [0, 1024] (0: chosen by the grid)", c.kv_splits));
  if (c.align != 1 && c.align != 2 && c.align != 4 && c.align != 8)
    throw ConfigError(fmt::format("align = {} must be 1, 2, 4 or 8", c.align));
  if (c.wgmma) {
    if (!target.arch_specific || target.sm < 90)
      throw ConfigError(fmt::format("the wgmma attention kernel needs sm_90a, not {}", target.arch()));
    if (d != 64 && d != 128)
      throw ConfigError(fmt::format("the wgmma attention kernel has head_dim 64 or 128, not {}", d));
    if (c.warps != 4 && c.warps != 8)
      throw ConfigError(fmt::format("warps = {}: the wgmma kernel takes 4 or 8 (one or two warpgroups)", c.warps));
    if (c.block_kv != 64 && c.block_kv != 128)
      throw ConfigError(fmt::format("block_kv = {}: the wgmma kernel takes 64 or 128", c.block_kv));
    if (c.stages < 2 || c.stages > 4) throw ConfigError(fmt::format("stages = {} must be in [2, 4]", c.stages));
    if (c.kv_splits > 1) throw ConfigError("the wgmma attention kernel does not split keys");
    if (c.align != 8) throw ConfigError("the wgmma attention kernel needs 16-byte aligned rows (align = 8)");
  }
  // Each thread copies whole 16-byte chunks of every tile.
  if (!c.wgmma && ((16 * c.warps * d / 8) % c.threads() != 0 || (c.block_kv * d / 8) % c.threads() != 0))
    throw ConfigError(fmt::format("{} threads do not divide the tiles' 16-byte chunks", c.threads()));
  const int limit = target.max_shared_per_block > 0 ? target.max_shared_per_block : 48 << 10;
  if (c.shared_bytes(s) > limit)
    throw ConfigError(fmt::format("{} bytes of shared memory exceed {}'s {}", c.shared_bytes(s), target.arch(), limit));
}

KernelSpec CudaAttentionSpec::generic() const {
  CudaAttentionConfig code = config;
  code.kv_splits = 0;  // the same code for any split
  return {"attention", kCudaAttentionSpecVersion, to_json(signature), to_json(code), target.str()};
}

nlohmann::json to_json(const CudaAttentionSpec& spec) { return to_json(spec.generic()); }
Hash128 CudaAttentionSpec::hash() const { return generic().hash(); }

std::string CudaAttentionSpec::name() const {
  return fmt::format(
      "flash_attention_{}_d{}{}{}_bc{}_w{}_a{}{}_{}_{}", dtype_name(signature.dtype), signature.head_dim_qk,
      signature.causal ? "_causal" : "", signature.lse ? "_lse" : "", config.block_kv, config.warps, config.align,
      config.wgmma ? fmt::format("_wgmma_s{}", config.stages) : "", target.arch(), hash().hex().substr(0, 8));
}

}  // namespace tessera
