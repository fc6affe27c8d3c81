// Compiled with -march=native: the plain loops and Eigen get this host's vector ISA, as a user building them here
// would.
#include <omp.h>
#include <rsb.h>

#include <Eigen/Dense>
#include <Eigen/Sparse>
#include <algorithm>
#include <dnnl.hpp>
#include <mutex>
#include <vector>

#include "bench/sparse_peer.hpp"

namespace tessera::bench {

namespace {

class EigenSpmm final : public SpmmPeer {
 public:
  std::string name() const override { return "eigen"; }
  void prepare(const CsrArrays& a, std::int64_t n, int threads, const float* b, float* d) override {
    a_ = std::make_unique<Map>(a.rows, a.cols, a.nnz, a.offsets, a.indices, a.values);
    b_ = std::make_unique<Dense>(b, a.cols, n);
    d_ = std::make_unique<DenseOut>(d, a.rows, n);
    threads_ = threads;
  }
  void run() override {
    Eigen::setNbThreads(threads_);
    d_->noalias() = *a_ * *b_;
  }

 private:
  using Map = Eigen::Map<const Eigen::SparseMatrix<float, Eigen::RowMajor, std::int32_t>>;
  using Dense = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  using DenseOut = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  std::unique_ptr<Map> a_;
  std::unique_ptr<Dense> b_;
  std::unique_ptr<DenseOut> d_;
  int threads_ = 1;
};

class LibrsbSpmm final : public SpmmPeer {
 public:
  ~LibrsbSpmm() override {
    if (mtx_) rsb_mtx_free(mtx_);
  }
  std::string name() const override { return "librsb"; }
  std::string unavailable(const CsrArrays&, std::int64_t) const override {
    return init() == RSB_ERR_NO_ERROR ? "" : "rsb_lib_init failed";
  }
  void prepare(const CsrArrays& a, std::int64_t n, int threads, const float* b, float* d) override {
    if (mtx_) rsb_mtx_free(mtx_);
    rsb_int_t t = threads;
    rsb_lib_set_opt(RSB_IO_WANT_EXECUTING_THREADS, &t);
    rsb_err_t err = RSB_ERR_NO_ERROR;
    mtx_ = rsb_mtx_alloc_from_csr_const(a.values, a.offsets, a.indices, static_cast<rsb_nnz_idx_t>(a.nnz),
                                        RSB_NUMERICAL_TYPE_FLOAT, static_cast<rsb_coo_idx_t>(a.rows),
                                        static_cast<rsb_coo_idx_t>(a.cols), 1, 1, RSB_FLAG_DEFAULT_MATRIX_FLAGS, &err);
    n_ = n, b_ = b, d_ = d;
  }
  void run() override {
    const float alpha = 1, beta = 0;
    rsb_spmm(RSB_TRANSPOSITION_N, &alpha, mtx_, static_cast<rsb_coo_idx_t>(n_), RSB_FLAG_WANT_ROW_MAJOR_ORDER, b_,
             static_cast<rsb_nnz_idx_t>(n_), &beta, d_, static_cast<rsb_nnz_idx_t>(n_));
  }

 private:
  static rsb_err_t init() {
    static const rsb_err_t status = rsb_lib_init(RSB_NULL_INIT_OPTIONS);
    return status;
  }
  rsb_mtx_t* mtx_ = nullptr;
  std::int64_t n_ = 0;
  const float* b_ = nullptr;
  float* d_ = nullptr;
};

// The loop a user writes: rows in dynamic chunks over OpenMP threads, each entry's B row added into D's row.
class OpenmpSpmm final : public SpmmPeer {
 public:
  std::string name() const override { return "openmp"; }
  void prepare(const CsrArrays& a, std::int64_t n, int threads, const float* b, float* d) override {
    a_ = a, n_ = n, threads_ = threads, b_ = b, d_ = d;
  }
  void run() override {
    const CsrArrays a = a_;
    const std::int64_t n = n_;
    const float* __restrict b = b_;
    float* __restrict d = d_;
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads_)
    for (std::int64_t i = 0; i < a.rows; ++i) {
      float* __restrict row = d + i * n;
      for (std::int64_t j = 0; j < n; ++j) row[j] = 0;
      for (std::int32_t p = a.offsets[i]; p < a.offsets[i + 1]; ++p) {
        const float v = a.values[p];
        const float* __restrict brow = b + static_cast<std::int64_t>(a.indices[p]) * n;
#pragma omp simd
        for (std::int64_t j = 0; j < n; ++j) row[j] += v * brow[j];
      }
    }
  }

 private:
  CsrArrays a_;
  std::int64_t n_ = 0;
  int threads_ = 1;
  const float* b_ = nullptr;
  float* d_ = nullptr;
};

// The dense GEMM of the densified matrix: what sparse storage must beat.
class OnednnDenseSpmm final : public SpmmPeer {
 public:
  std::string name() const override { return "dense"; }
  std::string unavailable(const CsrArrays& a, std::int64_t) const override {
    return a.rows * a.cols > (std::int64_t{1} << 28) ? "the densified matrix would take more than 1 GiB" : "";
  }
  void prepare(const CsrArrays& a, std::int64_t n, int threads, const float* b, float* d) override {
    dense_.assign(static_cast<std::size_t>(a.rows * a.cols), 0.0f);
    for (std::int64_t i = 0; i < a.rows; ++i)
      for (std::int32_t p = a.offsets[i]; p < a.offsets[i + 1]; ++p)
        dense_[static_cast<std::size_t>(i * a.cols + a.indices[p])] = a.values[p];
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const auto a_d = dnnl::memory::desc({a.rows, a.cols}, dt::f32, tag::ab);
    const auto b_d = dnnl::memory::desc({a.cols, n}, dt::f32, tag::ab);
    const auto d_d = dnnl::memory::desc({a.rows, n}, dt::f32, tag::ab);
    matmul_ = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_d, b_d, d_d), engine_));
    a_mem_ = dnnl::memory(a_d, engine_, dense_.data());
    b_mem_ = dnnl::memory(b_d, engine_, const_cast<float*>(b));
    d_mem_ = dnnl::memory(d_d, engine_, d);
    threads_ = threads;
  }
  void run() override {
    omp_set_num_threads(threads_);
    matmul_.execute(stream_, {{DNNL_ARG_SRC, a_mem_}, {DNNL_ARG_WEIGHTS, b_mem_}, {DNNL_ARG_DST, d_mem_}});
    stream_.wait();
  }

 private:
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  dnnl::matmul matmul_;
  dnnl::memory a_mem_, b_mem_, d_mem_;
  std::vector<float> dense_;
  int threads_ = 1;
};

}  // namespace

std::unique_ptr<SpmmPeer> make_eigen_spmm() { return std::make_unique<EigenSpmm>(); }
std::unique_ptr<SpmmPeer> make_librsb_spmm() { return std::make_unique<LibrsbSpmm>(); }
std::unique_ptr<SpmmPeer> make_openmp_spmm() { return std::make_unique<OpenmpSpmm>(); }
std::unique_ptr<SpmmPeer> make_onednn_dense_spmm() { return std::make_unique<OnednnDenseSpmm>(); }

void openmp_sddmm(const CsrArrays& pattern, std::int64_t k, const float* a, const float* b, float* out, int threads) {
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads)
  for (std::int64_t i = 0; i < pattern.rows; ++i) {
    const float* __restrict arow = a + i * k;
    for (std::int32_t p = pattern.offsets[i]; p < pattern.offsets[i + 1]; ++p) {
      const float* __restrict brow = b + static_cast<std::int64_t>(pattern.indices[p]) * k;
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (std::int64_t q = 0; q < k; ++q) sum += arow[q] * brow[q];
      out[p] = sum * pattern.values[p];
    }
  }
}

}  // namespace tessera::bench
