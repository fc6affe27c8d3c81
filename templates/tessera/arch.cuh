// The arch wrappers: the only functions with inline PTX. Kernels call these; the device bodies live in arch/,
// the SIMT emulator supplies host bodies with the same signatures (tessera/emu/arch_host.cuh) and defines
// TESSERA_EMULATION, so no kernel changes between the GPU and the emulator.
//
// Shared memory is addressed by byte offsets into the kernel's dynamic shared memory (the emulator's per-block
// arena); global memory is read and written through ld_global/st_global.
#pragma once

#include "tessera/platform.cuh"

#if defined(TESSERA_EMULATION)
#include "tessera/emu/arch_host.cuh"
#else
#include "tessera/arch/cluster.cuh"
#include "tessera/arch/convert.cuh"
#include "tessera/arch/cp_async.cuh"
#include "tessera/arch/grid_flags.cuh"
#include "tessera/arch/ldmatrix.cuh"
#include "tessera/arch/mbarrier.cuh"
#include "tessera/arch/mma.cuh"
#include "tessera/arch/named_barrier.cuh"
#include "tessera/arch/registers.cuh"
#include "tessera/arch/shared.cuh"
#include "tessera/arch/shuffle.cuh"
#include "tessera/arch/tma.cuh"
#include "tessera/arch/wgmma.cuh"
#endif
