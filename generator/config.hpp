// Config: how to compute a GEMM on the CPU (register tile, cache blocks, unrolling), and its validation.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "generator/gemm_problem.hpp"
#include "generator/target.hpp"

namespace tessera {

// BLIS structure: a macro-tile of MC×NC outputs is computed in KC-deep slabs from packed panels of A (MC×KC)
// and B (KC×NC) by an MR×NR register micro-kernel; the macro-tiles are the parallel grid.
struct CpuGemmConfig {
  int mr = 8;
  int nr = 32;
  int kc = 256;
  int mc = 128;
  int nc = 512;
  int k_unroll = 4;

  // The default for a problem on a target, derived from the ISA and the cache sizes.
  static CpuGemmConfig default_for(const GemmProblem& problem, const Target& target);
  nlohmann::json to_json() const;
  static CpuGemmConfig from_json(const nlohmann::json& j);
  // Bytes of per-thread scratch: packed A and B panels and the partial-sum tile for K > KC.
  std::int64_t workspace_bytes() const;
  friend bool operator==(const CpuGemmConfig&, const CpuGemmConfig&) = default;
};

// Accepts the triple or throws one ConfigError naming the violated rule.
void validate(const GemmSignature& signature, const CpuGemmConfig& config, const Target& target);

}  // namespace tessera
