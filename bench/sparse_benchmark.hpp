// SpMM and SDDMM against their peers (sparse_peer.hpp), side by side in one process on the same buffers and
// threads, samples interleaved; every peer's output checked against tessera's.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "bench/sampling.hpp"

namespace tessera::bench {

// A pattern (a generator request or a .mtx path), the dense extent (N for SpMM, K for SDDMM) and the format
// tessera stores it in (auto: as Runtime::spmm chooses by the pattern, csr or bsr:RxC; the peers always take CSR).
struct SparseCase {
  std::string pattern;
  std::int64_t dense = 64;
  std::string format = "auto";
  std::string label() const;
};

// A path or a name in bench/suites/ ("spmm" → bench/suites/spmm.txt): lines "PATTERN DENSE [FORMAT]".
std::vector<SparseCase> load_sparse_suite(const std::string& path_or_name);
// "PATTERN@DENSE[@FORMAT];...".
std::vector<SparseCase> parse_sparse_cases(const std::string& list);

// Print their tables to `log` as rows complete; return the rows as JSON.
nlohmann::json run_spmm_benchmark(const std::vector<SparseCase>& cases, const std::vector<int>& threads,
                                  const std::vector<std::string>& peers, int repeat, const Sampling& sampling,
                                  std::ostream& log);
// A plot of a report's rows (either benchmark's): per thread count, tessera ÷ each peer per case on a log scale,
// with the parity and 2x lines.
std::string sparse_svg(const nlohmann::json& rows, const std::string& title);

nlohmann::json run_sddmm_benchmark(const std::vector<SparseCase>& cases, const std::vector<int>& threads, int repeat,
                                   const Sampling& sampling, std::ostream& log);

}  // namespace tessera::bench
