#include "generator/dtype.hpp"

#include <array>

namespace tessera {

namespace {
// tf32 is a math mode on GPUs; in memory it is stored as f32.
constexpr std::array<DTypeInfo, 6> kDTypes{{
    {DType::f32, "f32", 4, true},
    {DType::f16, "f16", 2, true},
    {DType::bf16, "bf16", 2, true},
    {DType::tf32, "tf32", 4, true},
    {DType::i8, "i8", 1, false},
    {DType::i32, "i32", 4, false},
}};
}  // namespace

const DTypeInfo& dtype_info(DType dtype) { return kDTypes[static_cast<std::size_t>(dtype)]; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

}  // namespace tessera
