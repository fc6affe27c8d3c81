#include "bench/peers/torch_attention_peer.hpp"

#include <dlfcn.h>

#include <array>
#include <mutex>

#include "generator/core/error.hpp"

namespace tessera::bench {

namespace {

using CreateFn = void* (*)(const std::int64_t*, int, float, int, char*, std::size_t);
using RunFn = int (*)(void*, const void*, const void*, const void*, void*, int, char*, std::size_t);
using DestroyFn = void (*)(void*);
using VersionFn = const char* (*)();

struct Module {
  CreateFn create = nullptr;
  RunFn run = nullptr;
  DestroyFn destroy = nullptr;
  VersionFn version = nullptr;
  std::string why;  // empty when loaded
};

const Module& module() {
  static Module m;
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef TESSERA_TORCH_PEER
    // Local: libtorch's symbols serve the module alone.
    void* handle = dlopen(TESSERA_TORCH_PEER, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      m.why = std::string("cannot load ") + TESSERA_TORCH_PEER + ": " + dlerror();
      return;
    }
    m.create = reinterpret_cast<CreateFn>(dlsym(handle, "tessera_torch_attention_create"));
    m.run = reinterpret_cast<RunFn>(dlsym(handle, "tessera_torch_attention_run"));
    m.destroy = reinterpret_cast<DestroyFn>(dlsym(handle, "tessera_torch_attention_destroy"));
    m.version = reinterpret_cast<VersionFn>(dlsym(handle, "tessera_torch_version"));
    if (!m.create || !m.run || !m.destroy || !m.version)
      m.why = std::string(TESSERA_TORCH_PEER) + " lacks its entry points";
#else
    m.why = "tessera-bench was built without libtorch (Debian's libtorch-dev)";
#endif
  });
  return m;
}

}  // namespace

std::string TorchAttention::unavailable() { return module().why; }

std::string TorchAttention::version() { return module().why.empty() ? module().version() : ""; }

std::unique_ptr<TorchAttention> TorchAttention::create(const AttentionShape& s, float scale, bool bf16) {
  if (!module().why.empty()) return nullptr;
  const std::array<std::int64_t, 6> sizes{s.batch, s.heads, s.kv_heads, s.seq_q, s.seq_kv, s.head_dim};
  std::array<char, 512> error{};
  void* handle = module().create(sizes.data(), s.causal ? 1 : 0, scale, bf16 ? 1 : 0, error.data(), error.size());
  if (!handle) throw Error(std::string("PyTorch peer: ") + error.data());
  return std::unique_ptr<TorchAttention>(new TorchAttention(handle));
}

TorchAttention::~TorchAttention() { module().destroy(handle_); }

void TorchAttention::run(const void* q, const void* k, const void* v, void* o, int threads) {
  std::array<char, 512> error{};
  if (module().run(handle_, q, k, v, o, threads, error.data(), error.size()) != 0)
    throw Error(std::string("PyTorch peer: ") + error.data());
}

}  // namespace tessera::bench
