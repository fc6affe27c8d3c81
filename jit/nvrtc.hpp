// NVRTC, loaded on first use: compiles generated CUDA sources (with the embedded templates) to PTX and CUBIN, and
// reads the ptxas report of what each kernel uses.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generator/core/cuda_target.hpp"

namespace tessera {

// What ptxas reports for one kernel.
struct KernelResources {
  int registers = 0;
  int static_shared_bytes = 0;
  int stack_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int constant_bytes = 0;  // cmem[0]: the parameter block
};

// Counts of instruction families in PTX text, the proof that a kernel is the kernel it claims to be.
struct PtxCounts {
  int mma = 0;            // mma.sync.aligned.*
  int ldmatrix = 0;       // ldmatrix.sync.aligned.*
  int cp_async = 0;       // cp.async.{ca,cg}.shared.global
  int cp_async_wait = 0;  // cp.async.wait_group
  int wgmma = 0;          // wgmma.mma_async.*
  int tma = 0;            // cp.async.bulk.tensor.*
  int local_access = 0;   // ld.local / st.local (spills or stack arrays)
  // The main loop: of the loops (a label and a branch back to it), the one holding the most mma, the innermost of
  // equals. Its mma and its other instructions (everything that issues: no labels, directives or asm braces).
  int main_loop_mma = 0;
  int main_loop_other = 0;
};
PtxCounts count_ptx(const std::string& ptx);

// Parses ptxas -v output ("Compiling entry function 'f'", "Used N registers, ...", "N bytes stack frame, ...").
std::map<std::string, KernelResources> parse_ptxas_report(const std::string& log);

struct CudaBinary {
  std::string ptx;
  std::vector<char> cubin;                           // empty when only PTX was requested
  std::string log;                                   // NVRTC's log, including the ptxas report
  std::map<std::string, KernelResources> resources;  // per kernel, from the ptxas report (CUBIN builds only)
  double compile_ms = 0;
  bool from_disk = false;  // taken from the disk cache rather than compiled now
};

class Nvrtc {
 public:
  // The process-wide NVRTC, loaded on first call: $TESSERA_NVRTC, libnvrtc.so.13, libnvrtc.so, then the toolkit's
  // lib64 under $CUDA_HOME or /usr/local/cuda. Throws Unavailable with the reasons when none loads.
  static const Nvrtc& instance();
  // "13.0"
  std::string version() const;

  // Compiles `source` (it may include any embedded template) for the target's architecture. With `cubin`, also
  // runs ptxas and returns the CUBIN and its resource report. Throws CompileError with NVRTC's log on failure.
  // Builds are kept in the disk cache (DiskCache::process_cache) and taken from it when there.
  CudaBinary compile(const std::string& source, const std::string& name, const CudaTarget& target, bool cubin) const;
  CudaBinary compile_uncached(const std::string& source, const std::string& name, const CudaTarget& target,
                              bool cubin) const;

  Nvrtc(const Nvrtc&) = delete;
  Nvrtc& operator=(const Nvrtc&) = delete;
  ~Nvrtc();

 private:
  Nvrtc();
  struct Api;
  Api* api_;
};

// The resource report of kernel `name` of a build, as every CUDA operation's `emit --json` gives it: arch, target,
// threads, registers, shared bytes (dynamic + static), spill and stack bytes, compile time, CUBIN size and the
// PTX's mma.sync / ldmatrix / cp.async / local-access counts.
nlohmann::json kernel_report(const std::string& name, const CudaTarget& target, int threads,
                             std::int64_t dynamic_shared, const CudaBinary& binary);

}  // namespace tessera
