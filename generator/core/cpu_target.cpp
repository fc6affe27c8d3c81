#include "generator/core/cpu_target.hpp"

#include <cpuid.h>
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "generator/core/error.hpp"
#include "generator/core/fma_rate.hpp"

namespace tessera {

namespace {
// The size of cpu0's cache of this level as Linux describes it (/sys/devices/system/cpu/cpu0/cache/indexN), that is
// the cache one core uses: data or unified, not instruction. 0 when sysfs does not say.
std::int64_t sysfs_cache_bytes(int level) {
  for (int index = 0; index < 8; ++index) {
    const auto file = [&](const char* name) {
      return fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/{}", index, name);
    };
    std::ifstream level_file(file("level")), type_file(file("type")), size_file(file("size"));
    int file_level = 0;
    std::string type, size;
    if (!(level_file >> file_level) || !(type_file >> type) || !(size_file >> size)) continue;
    if (file_level != level || type == "Instruction") continue;
    std::size_t digits = 0;
    const long long value = std::stoll(size, &digits);
    const std::string unit = size.substr(digits);
    const std::int64_t bytes = unit == "K" ? value << 10 : unit == "M" ? value << 20 : unit.empty() ? value : 0;
    if (bytes > 0) return bytes;
  }
  return 0;
}

// sysfs first: glibc's sysconf reads CPUID, which some VMs fill with the whole package's L3 (256 MiB on a Zen 3
// guest whose core shares 32 MiB). Then sysconf, then the default.
std::int64_t cache_size(int level, int sysconf_name, std::int64_t fallback) {
  try {
    if (const std::int64_t bytes = sysfs_cache_bytes(level); bytes > 0) return bytes;
  } catch (const std::exception&) {  // an unreadable size: the next source
  }
  const long v = sysconf(sysconf_name);
  return v > 0 ? v : fallback;
}

// vpdpbusd at the ISA's width: EVEX (AVX512_VNNI) for 512-bit vectors, VEX (AVX-VNNI) for AVX2's 256-bit ones.
// AVX-VNNI by CPUID (leaf 7, sub-leaf 1, EAX bit 4): not every compiler's __builtin_cpu_supports knows its name.
bool host_vnni(CpuIsa isa) {
  __builtin_cpu_init();
  if (isa == CpuIsa::Avx512) return __builtin_cpu_supports("avx512vnni");
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4)) != 0;
}
}  // namespace

std::string CpuTarget::host_amx_missing() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return "CPUID leaf 7 is missing";
  for (const auto& [bit, flag] : {std::pair{24, "amx_tile"}, {22, "amx_bf16"}, {25, "amx_int8"}})
    if ((edx & (1u << bit)) == 0) return std::string("the CPU lacks ") + flag;
  // XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA): the OS saves tile state across context switches.
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || (ecx & (1u << 27)) == 0) return "the OS has not enabled XSAVE";
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & (3u << 17)) != (3u << 17)) return "the OS does not save AMX tile state (XCR0)";
  return "";
}

std::string CpuTarget::str() const { return isa == CpuIsa::Avx512 ? "cpu:avx512" : "cpu:avx2"; }

std::string CpuTarget::cost_model_key() const {
  return isa == CpuIsa::Avx512 && vector_fmas_per_cycle >= 2 ? str() + ":fma2" : str();
}

bool CpuTarget::host_supports(CpuIsa isa) {
  __builtin_cpu_init();
  if (isa == CpuIsa::Avx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

CpuTarget CpuTarget::host() {
  CpuTarget t;
  if (!host_supports(CpuIsa::Avx2)) throw Unavailable("cpu: tessera needs a host with AVX2 and FMA");
  t.isa = host_supports(CpuIsa::Avx512) ? CpuIsa::Avx512 : CpuIsa::Avx2;
  t.avx512_bf16 = t.isa == CpuIsa::Avx512 && __builtin_cpu_supports("avx512bf16");
  t.vnni = host_vnni(t.isa);
  t.amx = t.isa == CpuIsa::Avx512 && host_amx_missing().empty();
  t.intel = __builtin_cpu_is("intel");
  if (t.isa == CpuIsa::Avx512) t.vector_fmas_per_cycle = host_avx512_fmas_per_cycle();
  t.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  t.l1d_bytes = cache_size(1, _SC_LEVEL1_DCACHE_SIZE, t.l1d_bytes);
  t.l2_bytes = cache_size(2, _SC_LEVEL2_CACHE_SIZE, t.l2_bytes);
  t.l3_bytes = cache_size(3, _SC_LEVEL3_CACHE_SIZE, t.l3_bytes);
  return t;
}

bool CpuTarget::host_has_extensions() const {
  __builtin_cpu_init();
  return host_supports(isa) && (!avx512_bf16 || __builtin_cpu_supports("avx512bf16")) && (!vnni || host_vnni(isa)) &&
         (!amx || host_amx_missing().empty());
}

CpuTarget CpuTarget::parse(std::string_view text) {
  const CpuTarget t = named(text);
  // AMX first: on a host without AVX-512 the flags AMX lacks say more than the ISA.
  if (t.amx && !host_amx_missing().empty())
    throw Unavailable("target " + std::string(text) + ": AMX unavailable: " + host_amx_missing());
  if (!host_supports(t.isa)) throw Unavailable("target " + std::string(text) + ": this host's CPU lacks the ISA");
  if (!t.host_has_extensions())
    throw Unavailable(
        "target " + std::string(text) + ": this host's CPU lacks " +
        (t.vnni && !host_vnni(t.isa) ? (t.isa == CpuIsa::Avx512 ? "avx512_vnni" : "avx_vnni") : "avx512_bf16"));
  return t;
}

CpuTarget CpuTarget::named(std::string_view text) {
  CpuTarget t = host();
  if (text == "cpu") return t;
  if (text == "cpu:amx") return named("cpu:avx512+amx");
  const std::string_view isa_text = text.substr(0, text.find('+'));
  CpuIsa isa;
  if (isa_text == "cpu:avx512")
    isa = CpuIsa::Avx512;
  else if (isa_text == "cpu:avx2")
    isa = CpuIsa::Avx2;
  else
    throw InvalidArgument("target", "unknown target '" + std::string(text) +
                                        "' (expected cpu, cpu:avx512, cpu:avx2 or cpu:amx, optionally +vnni, +bf16 or "
                                        "+amx)");
  if (isa != t.isa) t.vector_fmas_per_cycle = 2;  // AVX2 on an AVX-512 host, or AVX-512 named on an AVX2 one
  t.isa = isa;
  t.avx512_bf16 = t.avx512_bf16 && isa == CpuIsa::Avx512;
  t.vnni = host_vnni(isa);
  t.amx = t.amx && isa == CpuIsa::Avx512;
  for (std::string_view rest = text.substr(isa_text.size()); !rest.empty();) {
    rest.remove_prefix(1);  // the '+'
    const std::string_view extension = rest.substr(0, rest.find('+'));
    rest.remove_prefix(extension.size());
    if (extension == "vnni")
      t.vnni = true;
    else if (extension == "bf16" && isa == CpuIsa::Avx512)
      t.avx512_bf16 = true;
    else if (extension == "amx" && isa == CpuIsa::Avx512)
      t.amx = t.avx512_bf16 = t.vnni = true;  // every AMX CPU has both
    else
      throw InvalidArgument("target", "unknown extension '" + std::string(extension) + "' in '" + std::string(text) +
                                          "' (vnni; bf16 or amx on cpu:avx512; or cpu:amx)");
  }
  return t;
}

}  // namespace tessera
