// Included before an emulated kernel's source (the host compiler's -include): the CUDA keywords and built-ins as the
// SIMT emulator provides them. Each CUDA thread is a fiber; its indices and every collective come from the emulator
// through tessera_emu_api, which the emulator sets when it loads the kernel's shared library.
#pragma once

#define TESSERA_EMULATION 1

#include <math.h>

#include "tessera/emu/api.cuh"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// A kernel's cluster shape reaches the emulator through the entry the host compiler adds for it.
#define __cluster_dims__(...)
#define __grid_constant__
#define __align__(n) alignas(n)
// No __shared__: tessera kernels use only the dynamic shared memory (the emulator's per-block arena, through
// ld_shared/st_shared), so a static __shared__ declaration fails to compile here instead of escaping the checks.

extern "C" {
__attribute__((visibility("default"))) tessera_emu::Api* tessera_emu_api = nullptr;
}

// The emulator enters a kernel through a trampoline the host compiler adds for it ("<kernel>__emu_entry"): the
// launch's parameter block, opaque bytes to the emulator, passed on by value as a CUDA launch passes it.
template <class Params>
inline void tessera_emu_invoke(void (*kernel)(Params), const void* params) {
  kernel(*static_cast<const Params*>(params));
}

// CUDA's bit reinterpretation, which emitted code uses for non-finite float constants.
inline float __int_as_float(unsigned bits) { return __builtin_bit_cast(float, bits); }

#define threadIdx (tessera_emu_api->index()->thread_idx)
#define blockIdx (tessera_emu_api->index()->block_idx)
#define blockDim (tessera_emu_api->index()->block_dim)
#define gridDim (tessera_emu_api->index()->grid_dim)
#define __syncthreads() tessera_emu_api->syncthreads(__LINE__)
