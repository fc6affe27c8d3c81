// Attention requests of the tessera command (`attention`, `emit attention`): options, owned random buffers and the
// AttentionArgs viewing them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tessera/tessera.hpp"

namespace tessera::cli {

struct AttentionRequest {
  std::int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
  std::optional<std::int64_t> kv_heads, seq_kv, head_dim_v;  // absent: as heads, seq and head_dim
  std::vector<std::int64_t> seq_lens, seq_lens_kv;           // varlen: per batch item
  bool causal = false, lse = false;
  std::optional<float> scale;  // absent: 1/√head_dim
  std::string score_mod;
  std::vector<std::string> tensors;  // NAME=AxB... for the modifier's tensors
  std::vector<std::string> scalars;  // NAME=VALUE
  std::string layout = "bshd";
  std::string dtype = "f32";
  std::string target = "cpu";
  std::string config;
  int threads = 0;
};

void add_attention_options(CLI::App& app, AttentionRequest& request);

struct AttentionBuffers {
  std::vector<float> q, k, v, o, lse;
  std::vector<std::uint16_t> q16, k16, v16, o16;  // Q, K, V and O when they are bf16
  std::map<std::string, std::vector<float>> tensors;
  AttentionArgs args;
};
// Validates the request's numbers and fills Q, K, V and the modifier's tensors with uniform values in [-1, 1].
AttentionBuffers make_attention_buffers(const AttentionRequest& request, std::uint32_t seed = 42);

}  // namespace tessera::cli
