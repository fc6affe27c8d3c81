// The C side of an offline kernel library: the public header (one dispatching function per signature, each variant
// callable by index) and the driver compiled beside the kernels' objects (argument checks, the running CPU's ISA,
// the variant for a shape, the grid, a small thread pool). Neither needs LLVM, tessera or C++ at run time.
#pragma once

#include <string>
#include <vector>

#include "generator/gemm/cpu_gemm_spec.hpp"
#include "ops/library/library_manifest.hpp"

namespace tessera {

// One compiled kernel of a signature: its spec and the manifest shape its config was chosen for.
struct LibraryVariant {
  CpuGemmSpec spec;
  LibraryShape chosen_for;
  std::string symbol() const { return spec.name(); }
};

struct ResolvedKernel {
  LibraryKernel kernel;
  std::vector<LibraryVariant> variants;
};

std::string library_header(const std::string& library, const std::vector<ResolvedKernel>& kernels);
std::string library_c_source(const std::string& library, const std::vector<ResolvedKernel>& kernels);
// The C++ file that puts tessera's grid planner (compiled from its embedded sources) behind a C function.
std::string library_planner_shim(const std::string& library);

}  // namespace tessera
