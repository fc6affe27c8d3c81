// Sparse peers the SpMM and SDDMM benchmarks measure beside tessera: Eigen's sparse × dense product, librsb's
// multi-vector product, plain OpenMP CSR loops vectorised by the compiler, and for SpMM the dense GEMM of the
// densified matrix (oneDNN) to show where sparse stops paying.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tessera::bench {

// A CSR matrix with 32-bit indices and f32 values, as every peer takes it.
struct CsrArrays {
  std::int64_t rows = 0, cols = 0, nnz = 0;
  const std::int32_t* offsets = nullptr;
  const std::int32_t* indices = nullptr;
  const float* values = nullptr;
};

// D (rows × n, row-major) = A · B (cols × n, row-major).
class SpmmPeer {
 public:
  virtual ~SpmmPeer() = default;
  virtual std::string name() const = 0;
  // Empty when usable; otherwise why not.
  virtual std::string unavailable(const CsrArrays&, std::int64_t) const { return {}; }
  // Conversions, plans and thread settings, outside the timing.
  virtual void prepare(const CsrArrays& a, std::int64_t n, int threads, const float* b, float* d) = 0;
  virtual void run() = 0;
};

std::unique_ptr<SpmmPeer> make_eigen_spmm();
std::unique_ptr<SpmmPeer> make_librsb_spmm();
std::unique_ptr<SpmmPeer> make_openmp_spmm();
std::unique_ptr<SpmmPeer> make_onednn_dense_spmm();

// out[p] = dot(A[i,:], B[j,:]) · s[p] for each entry p = (i, j) of the pattern: the plain OpenMP loop, vectorised
// along K by the compiler. A is rows × k, B is cols × k, both row-major.
void openmp_sddmm(const CsrArrays& pattern, std::int64_t k, const float* a, const float* b, float* out, int threads);

}  // namespace tessera::bench
