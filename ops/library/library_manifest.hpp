// The manifest of an offline kernel library (`tessera library build`): its name and the kernels it holds, each an
// operation's signature with the CPU targets to emit it for and the shapes to choose its configs for. Parsed and
// checked whole before anything is built; every error names the entry and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "generator/core/cpu_target.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

struct LibraryShape {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
};

struct LibraryKernel {
  std::string name;  // a C identifier, unique in the library
  std::string op;    // "gemm"
  GemmSignature signature;
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
