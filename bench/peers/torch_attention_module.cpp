// The module behind TorchAttention (torch_attention_peer.hpp): PyTorch's unfused attention on ATen, behind a C ABI
// so that tessera-bench loads it with dlopen only when it compares against PyTorch.
//
// What a framework without a fused kernel runs (PyTorch 1.13 has no scaled_dot_product_attention; Hugging Face's
// eager attention): S = (Q·Kᵀ)·scale, plus an additive causal mask, softmax over the keys, O = P·V, each an ATen
// op, on 2-D matrices (at::mm reaches the BLAS directly; Debian's batched at::matmul of [1, S, d] by its transpose took
// 15 ms where at::mm took 6.5, S = 2048, d = 64). Per batch item and KV head, its query heads' rows stacked: the S of
// 8 heads of 8192² keys need not exist at once, and a decoding group's rows share one product.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/version.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>

namespace {

struct Peer {
  std::int64_t batch, heads, kv_heads, seq_q, seq_kv, head_dim;
  bool causal, bf16;
  float scale;
  at::Tensor mask;  // [Sq, Skv]: 0 where key j is visible to query i (bottom-right aligned), −inf elsewhere
};

void report(char* error, std::size_t size, const char* what) {
  if (error && size > 0) std::snprintf(error, size, "%s", what);
}

// Debian's libtorch multiplies through the system BLAS (libblas.so.3: OpenBLAS by default), whose threads
// at::set_num_threads leaves alone; the instance libtorch loaded is found by name, without loading another.
// Only on a change: at::set_num_threads rebuilds libtorch's thread pools (set on every call, a 512² head pair on two
// threads took 31 ms instead of 1.2).
void set_threads(int threads) {
  static int current = 0;
  if (threads == current) return;
  current = threads;
  at::set_num_threads(threads);
  using SetThreads = void (*)(int);
  static const auto openblas = [] {
    for (const char* name : {"libopenblas.so.0", "libblas.so.3"})
      if (void* handle = dlopen(name, RTLD_NOW | RTLD_NOLOAD))
        if (void* f = dlsym(handle, "openblas_set_num_threads")) return reinterpret_cast<SetThreads>(f);
    return SetThreads{nullptr};
  }();
  if (openblas) openblas(threads);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* tessera_torch_version() { return TORCH_VERSION; }

__attribute__((visibility("default"))) void* tessera_torch_attention_create(const std::int64_t* sizes, int causal,
                                                                            float scale, int bf16, char* error,
                                                                            std::size_t error_size) {
  try {
    auto* p = new Peer{sizes[0], sizes[1], sizes[2], sizes[3], sizes[4], sizes[5], causal != 0, bf16 != 0, scale, {}};
    if (p->causal) {
      const auto options = at::TensorOptions().dtype(p->bf16 ? at::kBFloat16 : at::kFloat);
      const at::Tensor i = at::arange(p->seq_q, at::kLong).unsqueeze(1), j = at::arange(p->seq_kv, at::kLong);
      p->mask = at::zeros({p->seq_q, p->seq_kv}, options)
                    .masked_fill_(j > i + (p->seq_kv - p->seq_q), -std::numeric_limits<float>::infinity());
    }
    return p;
  } catch (const std::exception& e) {
    report(error, error_size, e.what());
    return nullptr;
  }
}

__attribute__((visibility("default"))) int tessera_torch_attention_run(void* handle, const void* q, const void* k,
                                                                       const void* v, void* o, int threads, char* error,
                                                                       std::size_t error_size) {
  try {
    const Peer& p = *static_cast<const Peer*>(handle);
    set_threads(threads);
    const auto options = at::TensorOptions().dtype(p.bf16 ? at::kBFloat16 : at::kFloat);
    const std::int64_t group = p.heads / p.kv_heads, element = p.bf16 ? 2 : 4;
    const std::int64_t q_bytes = group * p.seq_q * p.head_dim * element, kv_bytes = p.seq_kv * p.head_dim * element;
    const auto at_bytes = [](const void* base, std::int64_t bytes) {
      return const_cast<char*>(static_cast<const char*>(base)) + bytes;
    };
    // A KV head's query heads are consecutive rows of Q and O (BHSD): one product against its K and V for them all.
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t g = 0; g < p.kv_heads; ++g) {
        const std::int64_t item = b * p.kv_heads + g;
        const at::Tensor qh = at::from_blob(at_bytes(q, item * q_bytes), {group * p.seq_q, p.head_dim}, options);
        const at::Tensor kh = at::from_blob(at_bytes(k, item * kv_bytes), {p.seq_kv, p.head_dim}, options);
        const at::Tensor vh = at::from_blob(at_bytes(v, item * kv_bytes), {p.seq_kv, p.head_dim}, options);
        at::Tensor oh = at::from_blob(at_bytes(o, item * q_bytes), {group * p.seq_q, p.head_dim}, options);
        at::Tensor s = at::mm(qh, kh.t()).mul_(p.scale);
        if (p.causal) s.view({group, p.seq_q, p.seq_kv}).add_(p.mask);
        at::mm_out(oh, at::softmax(s, -1), vh);
      }
    return 0;
  } catch (const std::exception& e) {
    report(error, error_size, e.what());
    return 1;
  }
}

__attribute__((visibility("default"))) void tessera_torch_attention_destroy(void* handle) {
  delete static_cast<Peer*>(handle);
}

}  // extern "C"
