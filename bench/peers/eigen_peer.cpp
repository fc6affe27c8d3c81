// Eigen's GEMM on row-major maps, compiled for this host's ISA and threaded through OpenMP.
#include <Eigen/Core>

#include "bench/gemm_peer.hpp"

namespace tessera::bench {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

class EigenPeer final : public GemmPeer {
 public:
  std::string name() const override { return "eigen"; }
  std::string unavailable(const GemmShape& s, int) const override {
    return s.inputs != GemmInputs::f32 ? "f32 only here" : "";
  }

  void prepare(const GemmShape& s, int threads, const void* a, const void* b, float* c) override {
    shape_ = s;
    a_ = static_cast<const float*>(a);
    b_ = static_cast<const float*>(b);
    c_ = c;
    threads_ = threads;
  }

  void run() override {
    Eigen::setNbThreads(threads_);
    const GemmShape& s = shape_;
    for (std::int64_t i = 0; i < s.batch; ++i) {
      Eigen::Map<RowMatrix> c(c_ + i * s.m * s.n, s.m, s.n);
      // A column-major matrix is the transpose of a row-major one with the dimensions swapped.
      Eigen::Map<const RowMatrix> a(a_ + i * s.m * s.k, s.a_col ? s.k : s.m, s.a_col ? s.m : s.k),
          b(b_ + i * s.k * s.n, s.b_col ? s.n : s.k, s.b_col ? s.k : s.n);
      if (s.a_col && s.b_col)
        c.noalias() = a.transpose() * b.transpose();
      else if (s.a_col)
        c.noalias() = a.transpose() * b;
      else if (s.b_col)
        c.noalias() = a * b.transpose();
      else
        c.noalias() = a * b;
    }
  }

  std::string details() const override {
    return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
           std::to_string(EIGEN_MINOR_VERSION) + " (" + Eigen::SimdInstructionSetsInUse() + ")";
  }

 private:
  GemmShape shape_;
  const float *a_ = nullptr, *b_ = nullptr;
  float* c_ = nullptr;
  int threads_ = 1;
};

}  // namespace

std::unique_ptr<GemmPeer> make_eigen_peer() { return std::make_unique<EigenPeer>(); }

}  // namespace tessera::bench
