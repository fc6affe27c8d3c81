// How many full-width vector FMAs a core of this host issues per cycle: what decides how many independent
// accumulators a register tile needs to keep the FMA units busy.
#pragma once

namespace tessera {

// Measured once per process: 512-bit FMAs per cycle (1 where a core runs them as two 256-bit halves, as a Zen 4
// does; 2 with two full-width units, as on Intel Xeon since Skylake-SP Gold and on Zen 5). 0 without AVX-512.
int host_avx512_fmas_per_cycle();

}  // namespace tessera
