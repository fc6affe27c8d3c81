// What every template needs first: the function qualifiers and fixed-width integers, for NVRTC and for the
// host compiler that the SIMT emulator uses (which defines TESSERA_EMULATION and the CUDA built-ins).
#pragma once

#if defined(TESSERA_EMULATION)
#define TESSERA_DEVICE inline
#else
#define TESSERA_DEVICE __device__ __forceinline__
#endif

namespace tessera {

typedef unsigned int u32;
typedef unsigned short u16;
typedef long long i64;

}  // namespace tessera
