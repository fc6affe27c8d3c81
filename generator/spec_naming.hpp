// Pieces shared by the CPU and CUDA kernel specs: the content hash and the parts of a procedural kernel name.
#pragma once

#include <string>

#include "generator/gemm_problem.hpp"
#include "generator/kernel_spec.hpp"

namespace tessera {

// XXH3-128 of a text (the canonical JSON of a spec).
Hash128 hash_text(const std::string& text);
// "f32", or "bf16bf16f32" when the input and output types differ.
std::string types_tag(const GemmSignature& signature);
// One letter per operand layout, A B C D: "rrzr".
std::string layouts_tag(const GemmSignature& signature);
// A short, symbol-safe tag for the epilogue: "ab" for alpha*acc + beta*c, else its functions and tensors.
std::string epilogue_tag(const GemmSignature& signature);

}  // namespace tessera
