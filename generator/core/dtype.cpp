#include "generator/core/dtype.hpp"

#include <string>

#include "generator/core/error.hpp"

#include <array>

namespace tessera {

namespace {
// tf32 is a math mode on GPUs; in memory it is stored as f32.
constexpr std::array<DTypeInfo, 7> kDTypes{{
    {DType::f32, "f32", 4, true},
    {DType::f16, "f16", 2, true},
    {DType::bf16, "bf16", 2, true},
    {DType::tf32, "tf32", 4, true},
    {DType::i8, "i8", 1, false},
    {DType::i32, "i32", 4, false},
    {DType::u8, "u8", 1, false},
}};
}  // namespace

const DTypeInfo& dtype_info(DType dtype) {
  const auto index = static_cast<std::size_t>(dtype);
  if (index >= kDTypes.size())
    throw InvalidArgument("dtype", "value " + std::to_string(index) + " is not a DType (a cast from a bad integer)");
  return kDTypes[index];
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

std::uint16_t to_f16(float x) {
  const std::uint32_t bits = __builtin_bit_cast(std::uint32_t, x);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to or beyond inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): the value in units of 2^-24, rounded to nearest even.
    const float magnitude = __builtin_bit_cast(float, abs) * 16777216.0f;  // exact: a power-of-two scale
    const auto units = static_cast<std::uint32_t>(magnitude);
    const float rest = magnitude - static_cast<float>(units);
    const std::uint32_t rounded = units + (rest > 0.5f || (rest == 0.5f && (units & 1u)) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | rounded);
  }
  // Normal: rebias the exponent (127 → 15) and round the 23-bit mantissa to 10 bits, nearest even.
  const std::uint32_t rebased = abs - (112u << 23);
  const std::uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

float from_f16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return __builtin_bit_cast(float, sign | 0x7f800000u | (mantissa << 13));
  return __builtin_bit_cast(float, sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace tessera
