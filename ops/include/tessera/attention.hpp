// Fused attention in tessera's public C++ API: the arguments of Runtime::attention and the compiled kernel.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "generator/attention/attention_problem.hpp"
#include "generator/attention/cpu_attention_spec.hpp"
#include "tessera/tensor.hpp"

namespace tessera {

// O = softmax(score_mod(scale·Q·Kᵀ)) · V per batch item b and head h, FlashAttention-2's forward pass.
//
// Q and O are [batch, heads, seq_q, head_dim] views, K and V [batch, kv_heads, seq_kv, head_dim] (V's and O's last
// extent may differ from Q's and K's), with any strides: BSHD and BHSD memory are both read in place. Query head h
// reads KV head h / (heads / kv_heads) (grouped-query and multi-query attention).
//
// Variable lengths (FlashAttention's varlen API): Q, K, V and O are packed [total, heads, head_dim] views and
// seq_offsets_q / seq_offsets_kv hold batch + 1 cumulative offsets into their first dimension; batch item b's
// queries are rows [seq_offsets_q[b], seq_offsets_q[b + 1]).
//
// causal: query i sees key j ≤ i + seq_kv − seq_q (aligned bottom-right). A query that sees no key gets zeros (and
// log-sum-exp −inf).
struct AttentionArgs {
  Tensor q, k, v, o;
  Tensor lse;  // optional f32 log-sum-exp per query row: [batch, heads, seq_q] (varlen: [heads, total_q])
  bool causal = false;
  std::optional<float> scale;  // default 1/√head_dim
  std::vector<std::int64_t> seq_offsets_q, seq_offsets_kv;
  // An expression of s, i, j, h, b, scalars and tensors (see ScoreModifier), applied to each scaled score.
  ScoreModifier score_mod = ScoreModifier::identity();
  std::map<std::string, Tensor> tensors;  // f32 tensors the modifier reads, by name
  std::map<std::string, float> scalars;   // its scalars, by name
  int threads = 0;                        // 0: every thread of the runtime's pool

  AttentionArgs& set_score_mod(std::string_view text) {
    score_mod = ScoreModifier::parse(text);
    return *this;
  }
};

// Validates attention arguments and states the problem they describe; throws InvalidArgument naming the argument.
AttentionProblem describe_attention(const AttentionArgs& args);

// The code generated for a CPU attention spec: its LLVM IR or the host assembly the JIT would run.
std::string attention_llvm_ir(const CpuAttentionSpec& spec, int ir_opt_level = 0);
std::string attention_host_assembly(const CpuAttentionSpec& spec, int ir_opt_level = 0);

// A compiled attention kernel for one signature; it runs any sizes whose arguments match that signature.
class AttentionKernel {
 public:
  const CpuAttentionSpec& spec() const;
  std::string name() const { return spec().name(); }
  double compile_ms() const;
  const char* origin() const;  // "built" or "disk", as GemmKernel::origin
  // How the kernel rounds the softmax weights P before P·V, relative: 0 (f32), 2^-8 (bf16 products on vdpbf16ps).
  // compare_attention takes it as its allowance.
  double weight_rounding() const;
  // Scratch each thread uses, independent of the sequence lengths.
  std::int64_t workspace_bytes() const;
  // Memory a call of this problem on `threads` threads takes beyond its tensors, at most: the threads' scratch,
  // where several query blocks read a head's keys K and V packed once, and where decoding splits the keys into
  // chunks their partial outputs (O(S·d), never O(S²)).
  std::int64_t memory_bytes(const AttentionProblem& problem, int threads) const;
  void run(const AttentionArgs& args) const;

 private:
  friend class Runtime;
  struct Compiled;
  AttentionKernel(std::shared_ptr<const Compiled> compiled, std::shared_ptr<void> runtime);
  std::shared_ptr<const Compiled> compiled_;
  std::shared_ptr<void> runtime_;
};

}  // namespace tessera
