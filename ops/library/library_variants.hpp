// Which kernels a library's manifest compiles to: for each entry, target and shape the config the runtime would
// choose there (GEMM: the cost model's best that runs the arguments as given, plus one running any shape; SpMM and
// SDDMM and attention: their default_for, as the runtime chooses), each distinct spec once.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "generator/attention/cpu_attention_spec.hpp"
#include "generator/gemm/cpu_gemm_spec.hpp"
#include "generator/sparse/cpu_sparse_spec.hpp"
#include "ops/library/library_manifest.hpp"

namespace tessera {

struct CpuModuleSource;

// One compiled kernel of a signature: its spec (of the entry's op) and the manifest shape its config was chosen for.
struct LibraryVariant {
  std::variant<CpuGemmSpec, CpuSpmmSpec, CpuSddmmSpec, CpuAttentionSpec> spec;
  LibraryShape chosen_for;
  std::string symbol() const;
  const CpuTarget& target() const;
  // The driver's name of the tier (the manifest's target) the variant serves: ISA_AMX, ISA_AVX512 or ISA_AVX2. A call
  // runs the variants of the highest tier the CPU runs; one kernel may serve several tiers.
  const char* tier() const;
  Hash128 hash() const;
  CpuModuleSource module_source() const;
};

struct ResolvedKernel {
  LibraryKernel kernel;
  std::vector<LibraryVariant> variants;
};

// Throws Error when no config runs a shape on a target.
std::vector<ResolvedKernel> resolve_variants(const LibraryManifest& manifest);

}  // namespace tessera
