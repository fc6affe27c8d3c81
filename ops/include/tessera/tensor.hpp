// Tensor views: a pointer, a dtype, a shape and element strides (outermost first). They never own memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "generator/core/dtype.hpp"
#include "generator/core/layout.hpp"

namespace tessera {

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;

  bool empty() const { return data == nullptr && shape.empty(); }
  std::size_t rank() const { return shape.size(); }

  // A rows×cols matrix; `ld` is the leading dimension (0: the minimum, cols for row-major, rows for col-major).
  static Tensor matrix(void* data, std::int64_t rows, std::int64_t cols, Layout layout = Layout::row_major(),
                       std::int64_t ld = 0, DType dtype = DType::f32);
  // `batch` matrices `batch_stride` elements apart (0: packed back to back).
  static Tensor batched(void* data, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                        Layout layout = Layout::row_major(), std::int64_t ld = 0, std::int64_t batch_stride = 0,
                        DType dtype = DType::f32);
  static Tensor vector(float* data, std::int64_t size, std::int64_t stride = 1);

  std::string describe() const;  // "f32[3, 4] strides [4, 1]"
};

}  // namespace tessera
