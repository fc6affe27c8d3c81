#include "generator/cuda/attention_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "generator/cuda/expr_cuda.hpp"

namespace tessera {

namespace {
// The modifier as a device functor: positions as 64-bit integers, scalars and tensors from the parameter block.
std::string score_mod_source(const ScoreModifier& mod) {
  if (mod.is_identity()) return "struct ScoreMod {\n  static constexpr bool kIdentity = true;\n};\n";
  const auto& tensors = mod.tensors();
  const auto& scalars = mod.scalars();
  std::function<std::string(const ExprNode&)> leaf = [&](const ExprNode& node) -> std::string {
    if (node.op == ExprOp::Var) {
      if (node.name == "s" || node.name == "i" || node.name == "j" || node.name == "h" || node.name == "b")
        return node.name;
      const auto k = std::find(scalars.begin(), scalars.end(), node.name) - scalars.begin();
      return fmt::format("p.mod_scalars[{}]", k);
    }
    const auto t = std::find_if(tensors.begin(), tensors.end(), [&](const auto& u) { return u.name == node.name; }) -
                   tensors.begin();
    std::string offset;
    for (std::size_t k = 0; k < node.args.size(); ++k)
      offset += fmt::format("{}({}) * p.mod_strides[{}][{}]", k ? " + " : "", print_cuda(node.args[k], leaf), t, k);
    return fmt::format("tessera::ld_global(p.mod_data[{}] + ({}))", t, offset);
  };
  return fmt::format(
      "// {}\nstruct ScoreMod {{\n  static constexpr bool kIdentity = false;\n"
      "  TESSERA_DEVICE static float apply(float s, tessera::i64 i, tessera::i64 j, tessera::i64 h, tessera::i64 b,\n"
      "                                    const tessera::AttentionParams& p) {{\n"
      "    (void)i, (void)j, (void)h, (void)b, (void)p;\n    return {};\n  }}\n}};\n",
      mod.text(), print_cuda(mod.tree(), leaf));
}
}  // namespace

CudaAttentionSource emit_cuda_attention(const CudaAttentionSpec& spec) {
  validate(spec.signature, spec.config, spec.target);
  CudaAttentionSource out;
  out.kernel = spec.name();
  out.combine_kernel = spec.combine_name();
  out.threads = spec.config.threads();
  out.shared_bytes = spec.config.shared_bytes(spec.signature);
  const bool bf16 = spec.signature.dtype == DType::bf16;
  const std::string common = fmt::format(
      R"(// {kernel}
#include "tessera/attention/{header}"

{modifier}
struct Config {{
  using Mod = ScoreMod;
  using Element = tessera::{element};
  static constexpr int kInput = tessera::{input};
  static constexpr int D = {d}, BC = {bc}, Warps = {warps}, Align = {align}, Stages = {stages};
  static constexpr bool Causal = {causal};
}};
)",
      fmt::arg("kernel", out.kernel),
      fmt::arg("header", spec.config.wgmma ? "flash_forward_wgmma.cuh" : "flash_forward.cuh"),
      fmt::arg("modifier", score_mod_source(spec.signature.score_mod)),
      fmt::arg("element", bf16 ? "bfloat16_t" : "half_t"), fmt::arg("input", bf16 ? "kInputBf16" : "kInputF16"),
      fmt::arg("d", spec.signature.head_dim_qk), fmt::arg("bc", spec.config.block_kv),
      fmt::arg("warps", spec.config.warps), fmt::arg("align", spec.config.align),
      fmt::arg("stages", spec.config.stages), fmt::arg("causal", spec.signature.causal ? "true" : "false"));
  if (spec.config.wgmma) {
    // One block of a producer warpgroup and the consumers; the TMA maps are read through the parameter.
    out.code = common + fmt::format(R"(
extern "C" __global__ void __launch_bounds__({threads}, 1) {kernel}(const __grid_constant__ tessera::AttentionParams p) {{
  tessera::flash_forward_wgmma<Config>(p);
}}
)",
                                    fmt::arg("kernel", out.kernel), fmt::arg("threads", out.threads));
    out.combine_kernel.clear();
    return out;
  }
  out.code = common + fmt::format(R"(
extern "C" __global__ void __launch_bounds__({threads}) {kernel}(const tessera::AttentionParams p) {{
  tessera::flash_forward<Config>(p);
}}

extern "C" __global__ void __launch_bounds__({threads}) {combine}(const tessera::AttentionParams p) {{
  tessera::flash_combine<Config>(p);
}}
)",
                                  fmt::arg("kernel", out.kernel), fmt::arg("combine", out.combine_kernel),
                                  fmt::arg("threads", out.threads));
  return out;
}

}  // namespace tessera
