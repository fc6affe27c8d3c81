#include "tessera/tensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "generator/core/error.hpp"

namespace tessera {

Tensor Tensor::matrix(void* data, std::int64_t rows, std::int64_t cols, Layout layout, std::int64_t ld, DType dtype) {
  if (layout.kind() == LayoutKind::RowMajor) return {data, dtype, {rows, cols}, {ld ? ld : cols, 1}};
  if (layout.kind() == LayoutKind::ColMajor) return {data, dtype, {rows, cols}, {1, ld ? ld : rows}};
  throw InvalidArgument("layout", "Tensor::matrix takes row or col; build other views with explicit strides");
}

Tensor Tensor::batched(void* data, std::int64_t batch, std::int64_t rows, std::int64_t cols, Layout layout,
                       std::int64_t ld, std::int64_t batch_stride, DType dtype) {
  Tensor m = matrix(data, rows, cols, layout, ld, dtype);
  const std::int64_t packed = layout.kind() == LayoutKind::RowMajor ? rows * m.strides[0] : cols * m.strides[1];
  return {data, dtype, {batch, rows, cols}, {batch_stride ? batch_stride : packed, m.strides[0], m.strides[1]}};
}

Tensor Tensor::vector(float* data, std::int64_t size, std::int64_t stride) {
  return {data, DType::f32, {size}, {stride}};
}

std::string Tensor::describe() const {
  return fmt::format("{}[{}] strides [{}]", dtype_name(dtype), fmt::join(shape, ", "), fmt::join(strides, ", "));
}

}  // namespace tessera
