// The CUDA test matrix shared by the NVRTC compile test and the emulator's numerics test: every input type, layout
// pair, block tile, pipeline depth, split-K and alignment variant the issue asks for, for sm_80 and sm_90, and the
// wgmma kernel for sm_90a.
#pragma once

#include <fmt/format.h>

#include <cctype>
#include <ostream>
#include <string>
#include <vector>

#include "generator/gemm/cuda_gemm_spec.hpp"

namespace tessera {

struct MatrixCase {
  DType in;
  Layout a, b;
  std::string tile;  // config overrides
  std::string epilogue;
  std::string arch;

  std::string label() const {
    std::string text = fmt::format("{}_{}{}_{}_{}_{}", dtype_name(in), a.name()[0], b.name()[0], tile,
                                   epilogue.empty() ? "plain" : "fused", arch);
    for (char& c : text)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return text;
  }
};

inline void PrintTo(const MatrixCase& c, std::ostream* os) { *os << c.label(); }

inline std::vector<MatrixCase> matrix() {
  std::vector<MatrixCase> cases;
  const std::vector<std::pair<Layout, Layout>> layouts{{Layout::row_major(), Layout::row_major()},
                                                       {Layout::row_major(), Layout::col_major()},
                                                       {Layout::col_major(), Layout::row_major()},
                                                       {Layout::col_major(), Layout::col_major()}};
  const std::vector<std::string> tiles{
      "block_m=64,block_n=64,warp_m=32,warp_n=32", "block_m=128,block_n=128,warp_m=64,warp_n=64",
      "block_m=128,block_n=256,warp_m=64,warp_n=64", "block_m=256,block_n=128,warp_m=64,warp_n=64"};
  const std::string fused = "gelu(alpha*acc + bias[n]) + beta*c";
  int index = 0;
  for (const char* arch : {"sm_80", "sm_90"}) {
    // Tensor cores: every input type × layout × block tile, stages cycling 2..4, plain and fused epilogues.
    for (DType in : {DType::f16, DType::bf16, DType::tf32})
      for (const auto& [a, b] : layouts)
        for (const auto& tile : tiles) {
          const int stages = 2 + index % 3;
          const std::string epilogue = index % 2 ? fused : "";
          cases.push_back({in, a, b, fmt::format("{},stages={}", tile, stages), epilogue, arch});
          ++index;
        }
    // SIMT f32: each layout with both SIMT tiles, plain and fused.
    for (const auto& [a, b] : layouts)
      for (const char* tile : {"simt=1,block_m=128,block_n=128,block_k=8,warp_m=64,warp_n=32,stages=2",
                               "simt=1,block_m=64,block_n=64,block_k=8,warp_m=32,warp_n=32,stages=2"}) {
        cases.push_back({DType::f32, a, b, tile, index % 2 ? fused : "", arch});
        ++index;
      }
    // Split-K (with its reduction kernel) and unaligned operands (narrow cp.async, synchronous 2-byte copies).
    cases.push_back({DType::f16, Layout::row_major(), Layout::col_major(),
                     "block_m=64,block_n=64,warp_m=32,warp_n=32,stages=3,split_k=4", fused, arch});
    cases.push_back({DType::bf16, Layout::col_major(), Layout::row_major(),
                     "block_m=128,block_n=128,warp_m=64,warp_n=64,stages=3,align_a=1,align_b=2,align_c=1", "", arch});
    cases.push_back({DType::tf32, Layout::row_major(), Layout::row_major(),
                     "block_m=128,block_n=128,warp_m=64,warp_n=64,stages=3,align_a=1,align_b=2,split_k=2", fused,
                     arch});
    // Skinny M: 16- and 32-row block tiles (one m16 tile per warp, or two).
    cases.push_back({DType::f16, Layout::row_major(), Layout::col_major(),
                     "block_m=16,block_n=128,block_k=64,warp_m=16,warp_n=32,stages=3", fused, arch});
    cases.push_back({DType::bf16, Layout::col_major(), Layout::row_major(),
                     "block_m=32,block_n=128,warp_m=32,warp_n=32,stages=4,split_k=2", "", arch});
    // Stream-K (a tile's pieces through the workspace to its last block), one and two blocks per SM.
    cases.push_back({DType::f16, Layout::row_major(), Layout::col_major(),
                     "block_m=64,block_n=64,warp_m=32,warp_n=32,stages=3,stream_k=1", fused, arch});
    cases.push_back({DType::bf16, Layout::col_major(), Layout::row_major(),
                     "block_m=128,block_n=128,warp_m=64,warp_n=64,stages=4,stream_k=2", "", arch});
    cases.push_back({DType::tf32, Layout::col_major(), Layout::col_major(),
                     "block_m=64,block_n=64,warp_m=32,warp_n=32,stages=2,stream_k=1,align_a=1,align_b=2", fused, arch});
  }
  // Hopper's warp-specialised kernel (sm_90a; TMA, mbarriers, wgmma): every layout pair (K-major operands read
  // directly, M/N-major ones through wgmma's transpose bits), the tile shapes, f16 and bf16, shallow and deep rings,
  // plain and fused epilogues.
  const std::vector<std::string> wgmma_tiles{"block_m=64,block_n=64,warp_n=64", "block_m=64,block_n=128,warp_n=128",
                                             "block_m=128,block_n=128,warp_n=128", "block_m=128,block_n=64,warp_n=64",
                                             "block_m=128,block_n=256,warp_n=256"};
  for (DType in : {DType::f16, DType::bf16})
    for (const auto& [a, b] : layouts)
      for (int t = 0; t < 2; ++t) {
        const std::string& tile = wgmma_tiles[static_cast<std::size_t>(index % 5)];
        const int stages = tile.find("256") != std::string::npos ? 3 + index % 2 : 2 + index % 5;
        cases.push_back({in, a, b, fmt::format("wgmma=1,{},warp_m=64,block_k=64,stages={}", tile, stages),
                         index % 2 ? "gelu(alpha*acc + bias[n]) + beta*c" : "", "sm_90a"});
        ++index;
        (void)t;
      }
  // Split K (raw partial sums through the workspace, splitk_reduce's epilogue), 3 ways (uneven: some splits may have
  // no k-tile) and 2 ways with an M-major A.
  cases.push_back({DType::f16, Layout::row_major(), Layout::col_major(),
                   "wgmma=1,block_m=128,block_n=128,warp_n=128,warp_m=64,block_k=64,stages=4,split_k=3",
                   "gelu(alpha*acc + bias[n]) + beta*c", "sm_90a"});
  cases.push_back({DType::bf16, Layout::col_major(), Layout::row_major(),
                   "wgmma=1,block_m=64,block_n=256,warp_n=256,warp_m=64,block_k=64,stages=3,split_k=2", "", "sm_90a"});
  // Stream-K (one ring carrying a block's k-tiles across tiles; pieces handed over through the workspace).
  cases.push_back({DType::f16, Layout::row_major(), Layout::col_major(),
                   "wgmma=1,block_m=128,block_n=128,warp_n=128,warp_m=64,block_k=64,stages=4,stream_k=1",
                   "gelu(alpha*acc + bias[n]) + beta*c", "sm_90a"});
  cases.push_back({DType::bf16, Layout::col_major(), Layout::row_major(),
                   "wgmma=1,block_m=64,block_n=256,warp_n=256,warp_m=64,block_k=64,stages=3,stream_k=1", "", "sm_90a"});
  cases.push_back({DType::tf32, Layout::row_major(), Layout::col_major(),
                   "wgmma=1,block_m=128,block_n=128,warp_n=128,warp_m=64,block_k=32,stages=4,stream_k=1", "",
                   "sm_90a"});
  // D stored by TMA (boxes of 16 rows x 128 bytes from each warp's swizzled staging), with and without stream-K.
  cases.push_back({DType::f16, Layout::row_major(), Layout::col_major(),
                   "wgmma=1,block_m=128,block_n=256,warp_n=256,warp_m=64,block_k=64,stages=4,tma_store=1",
                   "gelu(alpha*acc + bias[n]) + beta*c", "sm_90a"});
  cases.push_back({DType::bf16, Layout::col_major(), Layout::row_major(),
                   "wgmma=1,block_m=64,block_n=128,warp_n=128,warp_m=64,block_k=64,stages=3,stream_k=1,tma_store=1", "",
                   "sm_90a"});
  cases.push_back({DType::tf32, Layout::row_major(), Layout::col_major(),
                   "wgmma=1,block_m=128,block_n=64,warp_n=64,warp_m=64,block_k=32,stages=4,tma_store=1", "", "sm_90a"});
  // Thread-block clusters: 2 x 1 (B multicast), 1 x 2 (A multicast) and 2 x 2, over K-major and M/N-major operands,
  // with TMA stores and split K.
  cases.push_back({DType::f16, Layout::row_major(), Layout::col_major(),
                   "wgmma=1,block_m=128,block_n=256,warp_n=256,warp_m=64,block_k=64,stages=4,tma_store=1,cluster_m=2",
                   "gelu(alpha*acc + bias[n]) + beta*c", "sm_90a"});
  cases.push_back({DType::bf16, Layout::col_major(), Layout::row_major(),
                   "wgmma=1,block_m=128,block_n=128,warp_n=128,warp_m=64,block_k=64,stages=4,split_k=2,cluster_n=2", "",
                   "sm_90a"});
  cases.push_back({DType::f16, Layout::row_major(), Layout::row_major(),
                   "wgmma=1,block_m=128,block_n=128,warp_n=128,warp_m=64,block_k=64,stages=3,cluster_m=2,cluster_n=2",
                   "", "sm_90a"});
  cases.push_back({DType::tf32, Layout::row_major(), Layout::col_major(),
                   "wgmma=1,block_m=128,block_n=128,warp_n=128,warp_m=64,block_k=32,stages=4,cluster_m=2",
                   "gelu(alpha*acc + bias[n]) + beta*c", "sm_90a"});
  // Stream-K over clusters (a cluster's blocks walk the same k-tiles of their cluster tile), with the hybrid's whole
  // tiles and M/N-major operands.
  cases.push_back({DType::f16, Layout::row_major(), Layout::col_major(),
                   "wgmma=1,block_m=128,block_n=128,warp_n=128,warp_m=64,block_k=64,stages=4,cluster_m=2,stream_k=1",
                   "gelu(alpha*acc + bias[n]) + beta*c", "sm_90a"});
  cases.push_back({DType::bf16, Layout::col_major(), Layout::row_major(),
                   "wgmma=1,block_m=128,block_n=64,warp_n=64,warp_m=64,block_k=64,stages=3,cluster_n=2,stream_k=1,"
                   "stream_k_waves=1",
                   "", "sm_90a"});
  cases.push_back({DType::f16, Layout::row_major(), Layout::row_major(),
                   "wgmma=1,block_m=128,block_n=128,warp_n=128,warp_m=64,block_k=64,stages=3,cluster_m=2,cluster_n=2,"
                   "stream_k=2",
                   "", "sm_90a"});
  // tf32 (K-major only: f32 in memory, 32-wide K tiles, m64nNk8).
  for (const char* tile :
       {"block_m=128,block_n=128,warp_n=128,stages=4", "block_m=64,block_n=256,warp_n=256,stages=3"}) {
    const bool odd = index++ % 2;  // the fused one plain, the plain one split 2 ways
    cases.push_back({DType::tf32, Layout::row_major(), Layout::col_major(),
                     fmt::format("wgmma=1,{},warp_m=64,block_k=32{}", tile, odd ? ",split_k=2" : ""),
                     odd ? "" : "gelu(alpha*acc + bias[n]) + beta*c", "sm_90a"});
  }
  return cases;
}

// The spec a case describes (epilogue tensors: bias[n]; C read by the fused epilogue).
inline CudaGemmSpec matrix_spec(const MatrixCase& mc) {
  const CudaTarget target = CudaTarget::parse("cuda:" + mc.arch);
  GemmSignature s;
  s.a = {mc.in, mc.a};
  s.b = {mc.in, mc.b};
  s.d = {DType::f32, Layout::row_major()};
  s.c = {DType::f32, Layout::zero()};
  if (!mc.epilogue.empty()) {
    s.epilogue = Epilogue::parse(mc.epilogue);
    s.c = s.d;
    s.inputs = {{"bias", IndexForm::N, {DType::f32, Layout::row_major()}}};
  }
  CudaGemmConfig config;
  config.math = mc.in == DType::f32 ? CudaMath::Simt : CudaMath::TensorOp;
  config.block_k = mc.in == DType::f32 ? 8 : 64 / dtype_bytes(mc.in);
  config.align_a = config.align_b = 16 / dtype_bytes(mc.in);
  config = config.with_overrides(mc.tile);
  return {s, config, target};
}

}  // namespace tessera
