// The pieces of a library's C header and driver that each operation contributes (library_gemm_c.cpp,
// library_sparse_c.cpp) and the checks they share; library_c_source.cpp puts them around the common driver (errors,
// the running CPU's ISA, threads, the pool).
#pragma once

#include <string>
#include <vector>

#include "generator/gemm/gemm_problem.hpp"
#include "ops/library/library_c_source.hpp"

namespace tessera {

std::string c_upper(std::string s);
std::string_view layout_word(const Layout& l);

// The header's lines listing an epilogue's tensors (" * inputs[i]: name[form], f32, ...").
std::string inputs_comment(const std::vector<EpilogueInput>& inputs);
// C statements returning fail(...) unless a matrix operand `x->NAME` has strides for `layout` (rows × cols given
// as C expressions) and, where `needs_data`, a pointer.
std::string operand_checks(const std::string& fn, const char* name, const Layout& layout, const char* rows,
                           const char* cols, bool needs_data);
// The same for the epilogue's tensors in x->inputs (M values, N values or M×N row-major).
std::string input_checks(const std::string& fn, const std::vector<EpilogueInput>& inputs, const char* rows,
                         const char* cols);

// What every kernel of a library has beside its dispatcher: its variants' count and names, and a variant run by index
// after the kernel's argument checks (`check_<fn>`), as `run(&variant, x)`.
std::string variant_accessors(const std::string& fn, const std::string& args_type, const std::string& run);

// GEMM: the args type (header), the kernels' calling convention, variant table and dispatch (driver, once), and
// each kernel's functions.
std::string gemm_header_types(const std::string& lib);
std::string gemm_header_kernel(const std::string& lib, const ResolvedKernel& r);
std::string gemm_driver_common(const std::string& lib);
std::string gemm_driver_kernel(const std::string& lib, const ResolvedKernel& r);

// SpMM and SDDMM, the same way.
std::string sparse_header_types(const std::string& lib);
std::string sparse_header_kernel(const std::string& lib, const ResolvedKernel& r);
std::string sparse_driver_common(const std::string& lib, bool spmm, bool sddmm);
std::string sparse_driver_kernel(const std::string& lib, const ResolvedKernel& r);

// Attention, the same way, and the C++ file that puts tessera's attention schedule behind a C function.
std::string attention_header_types(const std::string& lib);
std::string attention_header_kernel(const std::string& lib, const ResolvedKernel& r);
std::string attention_driver_common(const std::string& lib);
std::string attention_driver_kernel(const std::string& lib, const ResolvedKernel& r);
std::string attention_shim(const std::string& lib);

}  // namespace tessera
