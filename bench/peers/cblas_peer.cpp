// OpenBLAS and BLIS through their CBLAS interfaces. Both export the same symbols, so each is dlopen'ed privately
// (RTLD_LOCAL) and its functions looked up in its own handle.
#include <dlfcn.h>

#include <cstdlib>

#include "bench/gemm_peer.hpp"

namespace tessera::bench {

namespace {

enum { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
using SetThreadsFn = void (*)(int);
using SetThreadsLongFn = void (*)(long);
using CoreNameFn = char* (*)();

class CblasPeer final : public GemmPeer {
 public:
  CblasPeer(std::string name, const char* library) : name_(std::move(name)) {
    if (name_ == "openblas") {
      // This machine sets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for old numpy builds; the benchmark lets OpenBLAS
      // detect the CPU itself (these are read when the library loads).
      unsetenv("OPENBLAS_CORETYPE");
      unsetenv("OPENBLAS_L2_SIZE");
    }
    handle_ = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      reason_ = std::string("cannot load ") + library + ": " + dlerror();
      return;
    }
    if (name_ == "openblas") reload_openblas_if_generic(library);
    if (!handle_) return;
    sgemm_ = reinterpret_cast<SgemmFn>(dlsym(handle_, "cblas_sgemm"));
    if (!sgemm_) reason_ = std::string(library) + " has no cblas_sgemm";
    if (name_ == "openblas") {
      openblas_threads_ = reinterpret_cast<SetThreadsFn>(dlsym(handle_, "openblas_set_num_threads"));
      if (auto core = reinterpret_cast<CoreNameFn>(dlsym(handle_, "openblas_get_corename"))) core_ = core();
    } else {
      blis_threads_ = reinterpret_cast<SetThreadsLongFn>(dlsym(handle_, "bli_thread_set_num_threads"));
    }
  }

  std::string name() const override { return name_; }
  std::string unavailable(const GemmShape& s, int) const override {
    return s.inputs != GemmInputs::f32 ? "f32 only" : reason_;
  }

  void prepare(const GemmShape& s, int threads, const void* a, const void* b, float* c) override {
    shape_ = s;
    a_ = static_cast<const float*>(a);
    b_ = static_cast<const float*>(b);
    c_ = c;
    if (openblas_threads_) openblas_threads_(threads);
    if (blis_threads_) blis_threads_(threads);
  }

  void run() override {
    const int m = static_cast<int>(shape_.m), n = static_cast<int>(shape_.n), k = static_cast<int>(shape_.k);
    for (std::int64_t i = 0; i < shape_.batch; ++i)
      sgemm_(kRowMajor, shape_.a_col ? kTrans : kNoTrans, shape_.b_col ? kTrans : kNoTrans, m, n, k, 1.0f,
             a_ + i * shape_.m * shape_.k, shape_.a_col ? m : k, b_ + i * shape_.k * shape_.n, shape_.b_col ? k : n,
             0.0f, c_ + i * shape_.m * shape_.n, n);
  }

  std::string details() const override { return core_.empty() ? "" : "core " + core_ + forced_; }

 private:
  // OpenBLAS takes a CPU it does not know for "Prescott", its SSE3 fallback: 0.3.21 does so on a Xeon of model 207
  // (32 GFLOP/s at 1024³ against 153 with its SkylakeX kernels). A peer is measured at its best, so it is loaded
  // again with the core type of the ISA the host has, and the report says so.
  void reload_openblas_if_generic(const char* library) {
    auto core = reinterpret_cast<CoreNameFn>(dlsym(handle_, "openblas_get_corename"));
    if (!core || std::string(core()) != "Prescott") return;
    __builtin_cpu_init();
    const char* type = __builtin_cpu_supports("avx512f")                                 ? "SkylakeX"
                       : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "Haswell"
                                                                                         : nullptr;
    if (!type) return;
    dlclose(handle_);
    setenv("OPENBLAS_CORETYPE", type, 1);
    handle_ = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    unsetenv("OPENBLAS_CORETYPE");
    if (!handle_) {
      reason_ = std::string("cannot load ") + library + " again: " + dlerror();
      return;
    }
    forced_ = " (OPENBLAS_CORETYPE: it took this CPU for Prescott)";
  }

  std::string name_, reason_, core_, forced_;
  void* handle_ = nullptr;
  SgemmFn sgemm_ = nullptr;
  SetThreadsFn openblas_threads_ = nullptr;
  SetThreadsLongFn blis_threads_ = nullptr;
  GemmShape shape_;
  const float *a_ = nullptr, *b_ = nullptr;
  float* c_ = nullptr;
};

}  // namespace

std::unique_ptr<GemmPeer> make_openblas_peer() { return std::make_unique<CblasPeer>("openblas", "libopenblas.so.0"); }
std::unique_ptr<GemmPeer> make_blis_peer() { return std::make_unique<CblasPeer>("blis", "libblis.so.4"); }

}  // namespace tessera::bench
