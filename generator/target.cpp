#include "generator/target.hpp"

#include <unistd.h>

#include <thread>

#include "generator/error.hpp"

namespace tessera {

namespace {
std::int64_t cache_size(int name, std::int64_t fallback) {
  const long v = sysconf(name);
  return v > 0 ? v : fallback;
}
}  // namespace

std::string Target::str() const { return isa == CpuIsa::Avx512 ? "cpu:avx512" : "cpu:avx2"; }

bool Target::host_supports(CpuIsa isa) {
  __builtin_cpu_init();
  if (isa == CpuIsa::Avx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

Target Target::host() {
  Target t;
  if (!host_supports(CpuIsa::Avx2)) throw Unavailable("cpu: tessera needs a host with AVX2 and FMA");
  t.isa = host_supports(CpuIsa::Avx512) ? CpuIsa::Avx512 : CpuIsa::Avx2;
  t.avx512_bf16 = t.isa == CpuIsa::Avx512 && __builtin_cpu_supports("avx512bf16");
  t.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  t.l1d_bytes = cache_size(_SC_LEVEL1_DCACHE_SIZE, t.l1d_bytes);
  t.l2_bytes = cache_size(_SC_LEVEL2_CACHE_SIZE, t.l2_bytes);
  t.l3_bytes = cache_size(_SC_LEVEL3_CACHE_SIZE, t.l3_bytes);
  return t;
}

Target Target::parse(std::string_view text) {
  const Target t = named(text);
  if (!host_supports(t.isa)) throw Unavailable("target " + std::string(text) + ": this host's CPU lacks the ISA");
  return t;
}

Target Target::named(std::string_view text) {
  Target t = host();
  if (text == "cpu") return t;
  CpuIsa isa;
  if (text == "cpu:avx512")
    isa = CpuIsa::Avx512;
  else if (text == "cpu:avx2")
    isa = CpuIsa::Avx2;
  else
    throw InvalidArgument("target",
                          "unknown target '" + std::string(text) + "' (expected cpu, cpu:avx512 or cpu:avx2)");
  t.isa = isa;
  t.avx512_bf16 = t.avx512_bf16 && isa == CpuIsa::Avx512;
  return t;
}

}  // namespace tessera
