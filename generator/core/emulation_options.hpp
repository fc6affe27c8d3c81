// How the SIMT emulator (the "cuda-emu" targets) runs a kernel: plain data, so that the public API can take it
// without exposing the emulator.
#pragma once

#include <cstdint>

namespace tessera {

// The order in which a block's runnable fibers are resumed; a kernel whose result depends on it has a race.
enum class EmuSchedule : unsigned char { Forward, Reverse, Shuffle };

// One kind of memory access over a run, counted per warp-level request as a profiler's source counters do: shared
// memory in wavefronts (bank conflicts make more than one per phase of the request: 32 lanes of 4-byte accesses, 16
// of 8-byte, 8 of 16-byte, one 8×8 matrix of an ldmatrix), global memory in 32-byte sectors. `ideal` is what the same
// request needs at best: one wavefront per phase, the bytes it moves in whole sectors.
struct EmuAccessCounters {
  std::uint64_t requests = 0;
  std::uint64_t transactions = 0;
  std::uint64_t ideal = 0;
};

// What the emulator counts when asked (EmuOptions::profile), summed over every launch that ran with it.
struct EmuProfile {
  EmuAccessCounters shared_load, shared_store, ldmatrix, cp_async_shared;  // wavefronts
  EmuAccessCounters global_load, global_store, cp_async_global;            // sectors
  std::uint64_t launches = 0;
};

struct EmuOptions {
  EmuSchedule schedule = EmuSchedule::Forward;
  std::uint64_t seed = 1;  // for Shuffle
  int workers = 0;         // OS threads running blocks; 0: one per hardware thread
  bool detect_races = true;
  EmuProfile* profile = nullptr;  // counted into when set (the caller owns it)
};

}  // namespace tessera
