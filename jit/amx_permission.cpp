#include "jit/amx_permission.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include "generator/core/cpu_target.hpp"
#include "generator/core/error.hpp"

namespace tessera {

namespace {
constexpr int kArchReqXcompPerm = 0x1023;  // <asm/prctl.h>: ARCH_REQ_XCOMP_PERM
constexpr int kXfeatureXtiledata = 18;     // the XSAVE component of the tile registers' data

std::string ask() {
  if (std::string missing = CpuTarget::host_amx_missing(); !missing.empty()) return missing;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
    return std::string("arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) failed: ") + std::strerror(errno);
  return "";
}
}  // namespace

void request_amx_tile_data() {
  static std::once_flag once;
  static std::string refused;
  std::call_once(once, [] { refused = ask(); });
  if (!refused.empty()) throw Unavailable("AMX unavailable: " + refused);
}

}  // namespace tessera
