// The parts of a GEMM kernel's procedural name shared by its CPU and CUDA specs.
#pragma once

#include <string>

#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

// "f32", or "bf16bf16f32" when the input and output types differ.
std::string types_tag(const GemmSignature& signature);
// One letter per operand layout, A B C D: "rrzr".
std::string layouts_tag(const GemmSignature& signature);
// A short, symbol-safe tag for the epilogue: "ab" for alpha*acc + beta*c, else its functions and tensors.
std::string epilogue_tag(const GemmSignature& signature);

}  // namespace tessera
