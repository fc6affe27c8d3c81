// Element types: one table with their names and sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

enum class DType : std::uint8_t { f32, f16, bf16, tf32, i8, i32 };

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int bytes;
  bool is_float;
};

const DTypeInfo& dtype_info(DType dtype);
inline std::string_view dtype_name(DType dtype) { return dtype_info(dtype).name; }
inline int dtype_bytes(DType dtype) { return dtype_info(dtype).bytes; }
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace tessera
