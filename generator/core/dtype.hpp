// Element types: one table with their names and sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

// i8 is signed, u8 unsigned: the int8 GEMM multiplies u8 A by i8 B (what vpdpbusd and oneDNN's int8 matmul take).
enum class DType : std::uint8_t { f32, f16, bf16, tf32, i8, i32, u8 };

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

// bfloat16 is the top half of an IEEE f32; conversion rounds to nearest even (NaN stays NaN).
inline std::uint16_t to_bf16(float x) {
  std::uint32_t bits = __builtin_bit_cast(std::uint32_t, x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}
inline float from_bf16(std::uint16_t x) { return __builtin_bit_cast(float, static_cast<std::uint32_t>(x) << 16); }

// IEEE binary16, round to nearest even (overflow → inf, NaN stays NaN, subnormals kept).
std::uint16_t to_f16(float x);
float from_f16(std::uint16_t x);

// TF32 as mma.sync consumes it: f32 with the low 13 mantissa bits cleared after rounding to nearest, ties away from
// zero (cvt.rna.tf32.f32).
inline float round_tf32(float x) {
  std::uint32_t bits = __builtin_bit_cast(std::uint32_t, x);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // inf and NaN unchanged
  bits = (bits + 0x1000u) & 0xffffe000u;
  return __builtin_bit_cast(float, bits);
}

}  // namespace tessera
