// cuBLAS, loaded with dlopen like the driver: cublasGemmEx on device buffers, for the GPU comparison.
#pragma once

#include <memory>

#include "generator/core/dtype.hpp"
#include "generator/core/layout.hpp"

namespace tessera::bench {

class Cublas {
 public:
  // libcublas.so.13 (or $TESSERA_CUBLAS); throws Unavailable with the reason.
  static std::shared_ptr<Cublas> load();
  ~Cublas();
  // Row-major f32 D (M×N, ld N) = A·B for A (M×K) and B (K×N) in the given layouts, inputs of `dtype` (f16, bf16,
  // or f32 with tf32 or f32 math), f32 accumulation. Device pointers; enqueued on the default stream.
  void gemm(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype, Layout a_layout, Layout b_layout,
            const void* a, const void* b, float* d) const;

 private:
  struct Api;
  explicit Cublas(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace tessera::bench
