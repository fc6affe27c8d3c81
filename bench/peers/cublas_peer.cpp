#include "bench/peers/cublas_peer.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "generator/core/error.hpp"
#include "jit/shared_library.hpp"

namespace tessera::bench {

// cuBLAS's C API (cublas_api.h, library_types.h), declared here so the benchmark builds without the headers (outside
// the anonymous namespace, as Cublas::Api's fields have them).
using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;

namespace {
constexpr int kOpN = 0, kOpT = 1;
constexpr int kR16F = 2, kR16BF = 14, kR32F = 0;
constexpr int kCompute32F = 68, kCompute32FFastTf32 = 77;
constexpr int kGemmDefault = -1;
}  // namespace

struct Cublas::Api {
  SharedLibrary library;
  cublasHandle_t handle = nullptr;
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, int, int, int, int, int, const void*, const void*, int, int, const void*,
                            int, int, const void*, void*, int, int, int, int) = nullptr;
  explicit Api(SharedLibrary lib) : library(std::move(lib)) {}
};

Cublas::Cublas(std::unique_ptr<Api> api) : api_(std::move(api)) {}

Cublas::~Cublas() {
  if (api_->handle) api_->destroy(api_->handle);
}

std::shared_ptr<Cublas> Cublas::load() {
  const char* env = std::getenv("TESSERA_CUBLAS");
  auto api = std::make_unique<Api>(SharedLibrary::open(
      "cuBLAS", {env ? env : "", "libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"}));
  api->create = api->library.get<decltype(api->create)>("cublasCreate_v2");
  api->destroy = api->library.get<decltype(api->destroy)>("cublasDestroy_v2");
  api->gemm_ex = api->library.get<decltype(api->gemm_ex)>("cublasGemmEx");
  if (const cublasStatus_t status = api->create(&api->handle); status != 0)
    throw Unavailable(fmt::format("cuBLAS: cublasCreate failed with status {}", status));
  return std::shared_ptr<Cublas>(new Cublas(std::move(api)));
}

void Cublas::gemm(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype, Layout a_layout, Layout b_layout,
                  const void* a, const void* b, float* d) const {
  // cuBLAS is column-major: a row-major D (M×N) is a column-major D^T (N×M) = B^T·A^T. A row-major operand is its
  // own transpose in column-major terms (no op); a column-major one needs op T.
  const bool a_row = a_layout.kind() == LayoutKind::RowMajor, b_row = b_layout.kind() == LayoutKind::RowMajor;
  const int type = dtype == DType::f16 ? kR16F : dtype == DType::bf16 ? kR16BF : kR32F;
  const int compute = dtype == DType::tf32 ? kCompute32FFastTf32 : kCompute32F;
  const float alpha = 1, beta = 0;
  const auto i = [](std::int64_t v) { return static_cast<int>(v); };
  const cublasStatus_t status =
      api_->gemm_ex(api_->handle, b_row ? kOpN : kOpT, a_row ? kOpN : kOpT, i(n), i(m), i(k), &alpha, b, type,
                    b_row ? i(n) : i(k), a, type, a_row ? i(k) : i(m), &beta, d, kR32F, i(n), compute, kGemmDefault);
  if (status != 0) throw Error(fmt::format("cuBLAS: cublasGemmEx failed with status {}", status));
}

}  // namespace tessera::bench
