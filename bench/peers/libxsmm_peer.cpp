// LIBXSMM's JIT small-matrix kernels (column-major, so C = A·B row-major is run as Cᵀ = Bᵀ·Aᵀ); several threads
// split the batch, or the rows when there is one matrix. It does no cache blocking: a peer for small shapes.
#include <libxsmm.h>
#include <omp.h>

#include <algorithm>

#include "bench/gemm_peer.hpp"

namespace tessera::bench {

namespace {

libxsmm_smmfunction dispatch(std::int64_t m, std::int64_t n, std::int64_t k) {
  const libxsmm_blasint lda = static_cast<libxsmm_blasint>(n), ldb = static_cast<libxsmm_blasint>(k),
                        ldc = static_cast<libxsmm_blasint>(n);
  const float alpha = 1, beta = 0;
  return libxsmm_smmdispatch(static_cast<libxsmm_blasint>(n), static_cast<libxsmm_blasint>(m),
                             static_cast<libxsmm_blasint>(k), &lda, &ldb, &ldc, &alpha, &beta, nullptr, nullptr);
}

class LibxsmmPeer final : public GemmPeer {
 public:
  LibxsmmPeer() { libxsmm_init(); }
  ~LibxsmmPeer() override { libxsmm_finalize(); }
  std::string name() const override { return "libxsmm"; }

  std::string unavailable(const GemmShape& s, int) const override {
    if (s.inputs != GemmInputs::f32) return "f32 only here";
    if (s.a_col || s.b_col) return "row-major A and B only here";
    if (!dispatch(s.m, s.n, s.k)) return "no LIBXSMM kernel for this shape";
    return {};
  }

  void prepare(const GemmShape& s, int threads, const void* a, const void* b, float* c) override {
    shape_ = s;
    a_ = static_cast<const float*>(a);
    b_ = static_cast<const float*>(b);
    c_ = c;
    threads_ = threads;
    split_rows_ = s.batch < threads;
    rows_ = split_rows_ ? (s.m + threads - 1) / threads : s.m;
    full_ = dispatch(rows_, s.n, s.k);
    tail_ = split_rows_ && s.m % rows_ ? dispatch(s.m % rows_, s.n, s.k) : nullptr;
  }

  void run() override {
    const GemmShape& s = shape_;
    if (!split_rows_) {
#pragma omp parallel for num_threads(threads_) schedule(static) if (threads_ > 1)
      for (std::int64_t i = 0; i < s.batch; ++i) full_(b_ + i * s.k * s.n, a_ + i * s.m * s.k, c_ + i * s.m * s.n);
      return;
    }
    const std::int64_t chunks = (s.m + rows_ - 1) / rows_;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      const std::int64_t r0 = chunk * rows_;
      const libxsmm_smmfunction f = std::min(rows_, s.m - r0) == rows_ ? full_ : tail_;
      f(b_, a_ + r0 * s.k, c_ + r0 * s.n);
    }
  }

  std::string details() const override { return split_rows_ && threads_ > 1 ? "rows split across threads" : ""; }

 private:
  GemmShape shape_;
  const float *a_ = nullptr, *b_ = nullptr;
  float* c_ = nullptr;
  int threads_ = 1;
  bool split_rows_ = false;
  std::int64_t rows_ = 0;
  libxsmm_smmfunction full_ = nullptr, tail_ = nullptr;
};

}  // namespace

std::unique_ptr<GemmPeer> make_libxsmm_peer() { return std::make_unique<LibxsmmPeer>(); }

}  // namespace tessera::bench
