// The manifest of an offline kernel library (`tessera library build`): its name and the kernels it holds, each an
// operation's signature with the CPU targets to emit it for and the shapes to choose its configs for. Parsed and
// checked whole before anything is built; every error names the entry and the field.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "generator/attention/attention_problem.hpp"
#include "generator/core/cpu_target.hpp"
#include "generator/gemm/gemm_problem.hpp"
#include "generator/sparse/sparse_problem.hpp"

namespace tessera {

// A shape to choose a config for: GEMM's M×N×K (and batch); SpMM's A M×K (sparse) times B K×N; SDDMM's pattern M×N
// sampling A M×K times Bᵀ; attention's query and key lengths (m, n) and heads.
struct LibraryShape {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  std::int64_t heads = 0, kv_heads = 0;  // attention
};

struct LibraryKernel {
  std::string name;  // a C identifier, unique in the library
  std::string op;    // "gemm", "spmm", "sddmm" or "attention": which of the signatures below
  std::variant<GemmSignature, SpmmSignature, SddmmSignature, AttentionSignature> signature;
  std::vector<CpuTarget> targets;  // ISAs to emit; the library picks among them by the running CPU
  std::vector<LibraryShape> shapes;
  std::string canonical;  // the entry's canonical JSON: an unchanged entry has the same text
};

struct LibraryManifest {
  std::string name;  // a C identifier: the header, the libraries and the functions' prefix
  std::vector<LibraryKernel> kernels;
  std::string canonical;  // the whole manifest's canonical JSON
};

// Parses and checks a manifest; throws InvalidArgument("manifest: <where>", why) naming the entry and field.
LibraryManifest parse_library_manifest(const std::string& text);

// The manifest's JSON schema, as documented in README.md (printed by `tessera library schema`).
const char* library_manifest_schema();

}  // namespace tessera
