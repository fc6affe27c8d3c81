#include "generator/cuda/attention_source.hpp"

#include <fmt/format.h>

namespace tessera {

CudaAttentionSource emit_cuda_attention(const CudaAttentionSpec& spec) {
  validate(spec.signature, spec.config, spec.target);
  CudaAttentionSource out;
  out.kernel = spec.name();
  out.threads = spec.config.threads();
  out.shared_bytes = spec.config.shared_bytes(spec.signature);
  const bool bf16 = spec.signature.dtype == DType::bf16;
  out.code = fmt::format(
      R"(// {kernel}
#include "tessera/attention/flash_forward.cuh"

struct Config {{
  using Element = tessera::{element};
  static constexpr int kInput = tessera::{input};
  static constexpr int D = {d}, BC = {bc}, Warps = {warps}, Align = {align};
  static constexpr bool Causal = {causal};
}};

extern "C" __global__ void __launch_bounds__({threads}) {kernel}(const tessera::AttentionParams p) {{
  tessera::flash_forward<Config>(p);
}}
)",
      fmt::arg("kernel", out.kernel), fmt::arg("element", bf16 ? "bfloat16_t" : "half_t"),
      fmt::arg("input", bf16 ? "kInputBf16" : "kInputF16"), fmt::arg("d", spec.signature.head_dim_qk),
      fmt::arg("bc", spec.config.block_kv), fmt::arg("warps", spec.config.warps), fmt::arg("align", spec.config.align),
      fmt::arg("causal", spec.signature.causal ? "true" : "false"), fmt::arg("threads", out.threads));
  return out;
}

}  // namespace tessera
