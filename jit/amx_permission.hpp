// Linux hands a process AMX's tile data state (8 KiB per thread) only on request: an AMX instruction before the
// request faults. request_amx_tile_data asks once per process, before the first AMX kernel runs.
#pragma once

namespace tessera {

// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), once; throws Unavailable("AMX unavailable: why") when the
// CPU lacks AMX or the kernel refuses (the answer is kept: every later call throws the same).
void request_amx_tile_data();

}  // namespace tessera
