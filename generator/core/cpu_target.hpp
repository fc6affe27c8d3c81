// CpuTarget: where a kernel runs, with the numbers the generator and the cost model need.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

enum class CpuIsa : unsigned char { Avx2, Avx512 };

struct CpuTarget {
  CpuIsa isa = CpuIsa::Avx2;
  bool avx512_bf16 = false;  // vdpbf16ps: bf16 GEMMs with f32 accumulation
  // vpdpbusd: u8×i8 GEMMs with i32 accumulation, from AVX512_VNNI on AVX-512 targets and AVX-VNNI (VEX) on AVX2 ones.
  bool vnni = false;
  // AMX (amx_tile, amx_bf16, amx_int8, with the OS saving tile state): bf16 and int8 GEMM on tile registers. Only on
  // AVX-512 targets; a process must still ask Linux for the tile data (request_amx_tile_data) before running them.
  bool amx = false;
  // The host's vendor is Intel: rules measured on one vendor's cores (software prefetch kinds) follow it.
  bool intel = false;
  int cores = 1;
  std::int64_t l1d_bytes = 32 << 10;
  std::int64_t l2_bytes = 1 << 20;
  std::int64_t l3_bytes = 32 << 20;
  // Vector FMAs of the ISA's width issued per cycle: 2 for AVX2 everywhere, and for AVX-512 on cores with two
  // full-width units; 1 for AVX-512 on a core that splits it in halves (Zen 4). A register tile needs about 4 times
  // as many independent accumulators (latency 4) to keep them busy.
  int vector_fmas_per_cycle = 2;

  // f32 lanes per vector register and how many vector registers there are.
  int vector_lanes() const { return isa == CpuIsa::Avx512 ? 16 : 8; }
  int vector_registers() const { return isa == CpuIsa::Avx512 ? 32 : 16; }
  // The canonical text, "cpu:avx512" or "cpu:avx2"; it is what kernel specs record.
  std::string str() const;
  // Which shipped learned model fits this target: its ISA, and for AVX-512 whether the FMA units are full-width
  // ("cpu:avx512:fma2"), as the best register tiles differ (8×16 tiles run at half speed on two units).
  std::string cost_model_key() const;

  // The host CPU with its best ISA and its caches.
  static CpuTarget host();
  // "cpu" (the host), "cpu:avx512" or "cpu:avx2", each with the host's extensions, or with extensions named after
  // a '+' ("cpu:avx512+vnni+bf16", "cpu:avx2+vnni"); throws InvalidArgument for unknown text and Unavailable when
  // the host cannot run the requested ISA or extension.
  static CpuTarget parse(std::string_view text);
  // The same names without the host check: a target to emit kernels for, compute features, train and evaluate cost
  // models (its caches the host's until the caller sets them), not to run kernels on. Throws InvalidArgument for
  // unknown text.
  static CpuTarget named(std::string_view text);
  static bool host_supports(CpuIsa isa);
  // Whether the host has the extensions this target's kernels may use (avx512_bf16, VNNI of the target's width, AMX).
  bool host_has_extensions() const;
  // Why the host cannot run AMX kernels ("" when it can): the CPUID flag it lacks, or tile state the OS does not save.
  static std::string host_amx_missing();
};

}  // namespace tessera
