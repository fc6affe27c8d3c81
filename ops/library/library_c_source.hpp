// The C side of an offline kernel library: the public header (one dispatching function per signature, each variant
// callable by index) and the driver compiled beside the kernels' objects (argument checks, the running CPU's ISA,
// the variant for a shape, the work split, a small thread pool). Neither needs LLVM, tessera or C++ at run time.
#pragma once

#include <string>
#include <vector>

#include "ops/library/library_variants.hpp"

namespace tessera {

std::string library_header(const std::string& library, const std::vector<ResolvedKernel>& kernels);
std::string library_c_source(const std::string& library, const std::vector<ResolvedKernel>& kernels);
// The C++ file that puts tessera's grid planner (compiled from its embedded sources) behind a C function.
std::string library_planner_shim(const std::string& library);

}  // namespace tessera
