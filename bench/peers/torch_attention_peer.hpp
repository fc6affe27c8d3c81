// PyTorch's unfused attention as a framework without a fused kernel runs it (PyTorch 1.13 has no
// scaled_dot_product_attention): matmul, softmax, matmul on ATen tensors over the benchmark's own buffers.
// The peer lives in a module of its own (tessera_torch_peer, built where Debian's libtorch-dev is installed),
// loaded on first use: tessera-bench starts without libtorch's 300 MB of libraries, and runs without them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bench/attention_benchmark.hpp"

namespace tessera::bench {

class TorchAttention {
 public:
  // Loads the module once per process; unavailable() says why it cannot run (not built, not loadable).
  static std::unique_ptr<TorchAttention> create(const AttentionShape& s, float scale, bool bf16);
  static std::string unavailable();
  static std::string version();
  ~TorchAttention();
  TorchAttention(const TorchAttention&) = delete;
  TorchAttention& operator=(const TorchAttention&) = delete;

  // BHSD tensors: Q and O [B, H, Sq, D], K and V [B, KV, Skv, D], contiguous. Throws tessera::Error on failure.
  void run(const void* q, const void* k, const void* v, void* o, int threads);

 private:
  explicit TorchAttention(void* handle) : handle_(handle) {}
  void* handle_;
};

}  // namespace tessera::bench
