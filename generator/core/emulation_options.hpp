// How the SIMT emulator (the "cuda-emu" targets) runs a kernel: plain data, so that the public API can take it
// without exposing the emulator.
#pragma once

#include <cstdint>

namespace tessera {

// The order in which a block's runnable fibers are resumed; a kernel whose result depends on it has a race.
enum class EmuSchedule : unsigned char { Forward, Reverse, Shuffle };

struct EmuOptions {
  EmuSchedule schedule = EmuSchedule::Forward;
  std::uint64_t seed = 1;  // for Shuffle
  int workers = 0;         // OS threads running blocks; 0: one per hardware thread
  bool detect_races = true;
};

}  // namespace tessera
