// Fused attention against what a framework without a fused kernel runs: per head, S = Q·Kᵀ by oneDNN's matmul
// (scale and, for causal, the mask fused as post-ops), oneDNN's softmax, then P·V by its matmul; and PyTorch's
// ATen ops (torch_attention_peer.hpp) where tessera-bench was built with libtorch. Same buffers, same threads,
// samples interleaved; tessera's output checked against each peer's.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "bench/sampling.hpp"
#include "generator/core/dtype.hpp"

namespace tessera::bench {

struct AttentionShape {
  std::int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_kv = 1, head_dim = 64;
  bool causal = false;
  std::string label() const;  // "1x8/8x2048x2048xd64", "c" appended for causal
};

// A path or a name in bench/suites/ ("attention" → bench/suites/attention.txt), lines "B H KV_HEADS SQ SKV D CAUSAL".
std::vector<AttentionShape> load_attention_suite(const std::string& path_or_name);
// "BxHxGxSQxSKVxD[c],...".
std::vector<AttentionShape> parse_attention_shapes(const std::string& list);

// Prints its table to `log` as rows complete; returns the report (rows, command, host summary) as JSON.
// `dtype` f32 or bf16: Q, K, V and O of both contenders.
nlohmann::json run_attention_benchmark(const std::vector<AttentionShape>& shapes, const std::vector<int>& threads,
                                       int repeat, const Sampling& sampling, DType dtype, std::ostream& log);

}  // namespace tessera::bench
