// AttentionProblem: what a fused attention forward pass computes, O = softmax(score_mod(scale·Q·Kᵀ)) · V per batch
// item and head, independent of how. The signature is what changes generated code; sizes, strides and sequence
// lengths are runtime values.
#pragma once

#include <cstdint>
#include <vector>

#include "generator/attention/score_modifier.hpp"
#include "generator/core/dtype.hpp"
#include "generator/core/strided_layout.hpp"

namespace tessera {

struct AttentionSignature {
  DType dtype = DType::f32;  // of Q, K, V and O; scores, softmax and accumulation are f32
  std::int64_t head_dim_qk = 64, head_dim_v = 64;
  // The head dimension's stride of Q, K, V and O is 1 (vector accesses run along it), else a runtime value.
  bool q_unit_d = true, k_unit_d = true, v_unit_d = true, o_unit_d = true;
  // Query i sees key j only where j ≤ i + seq_kv − seq_q (aligned bottom-right, as FlashAttention-2).
  bool causal = false;
  bool lse = false;  // also writes the log-sum-exp of each query row's scores (what a backward pass needs)
  ScoreModifier score_mod = ScoreModifier::identity();

  // Throws InvalidArgument naming the field that breaks a rule.
  void check() const;
  friend bool operator==(const AttentionSignature& x, const AttentionSignature& y);
};

struct AttentionProblem {
  AttentionSignature signature;
  std::int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_kv = 1;
  // Variable lengths: per batch item (query length, key length); empty when every item has seq_q and seq_kv.
  std::vector<std::int64_t> seq_lens_q, seq_lens_kv;
  int threads = 0;  // for the cost models only, as GemmProblem::threads

  bool varlen() const { return !seq_lens_q.empty(); }
  std::int64_t q_len(std::int64_t b) const { return varlen() ? seq_lens_q[static_cast<std::size_t>(b)] : seq_q; }
  std::int64_t kv_len(std::int64_t b) const { return varlen() ? seq_lens_kv[static_cast<std::size_t>(b)] : seq_kv; }
  // Score pairs the softmax sees (causal: the visible ones only).
  double score_pairs() const;
  // 4·B·H·Sq·Skv·d, halved for causal, as FlashAttention's papers count (two products of 2·d flops per score).
  double flops() const;
};

// The key range [0, end) query i of a sequence sees: all keys, or causal ones up to i + seq_kv − seq_q.
inline std::int64_t visible_keys(bool causal, std::int64_t i, std::int64_t seq_q, std::int64_t seq_kv) {
  if (!causal) return seq_kv;
  const std::int64_t end = i + seq_kv - seq_q + 1;
  return end < 0 ? 0 : (end > seq_kv ? seq_kv : end);
}

}  // namespace tessera
