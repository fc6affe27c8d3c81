// Loads and stores of C/D elements in their memory type, converting to and from f32.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/numeric.cuh"

namespace tessera {

TESSERA_DEVICE float to_f32(float x) { return x; }
TESSERA_DEVICE float to_f32(half_t x) { return f16_to_f32(x); }
TESSERA_DEVICE float to_f32(bfloat16_t x) { return bf16_to_f32(x); }

template <class T>
TESSERA_DEVICE T from_f32(float x);
template <>
TESSERA_DEVICE float from_f32<float>(float x) {
  return x;
}
template <>
TESSERA_DEVICE half_t from_f32<half_t>(float x) {
  return f32_to_f16(x);
}
template <>
TESSERA_DEVICE bfloat16_t from_f32<bfloat16_t>(float x) {
  return f32_to_bf16(x);
}

// N consecutive elements as one aligned vector store (N × sizeof(T) is 4, 8 or 16 bytes, or one element).
template <class T, int N>
struct alignas(sizeof(T) * N) Vector {
  T v[N];
};

}  // namespace tessera
