// Benchmark reports: a readable table, one JSON document and an SVG plot (GFLOP/s per shape, a series per library).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/gemm_benchmark.hpp"

namespace tessera::bench {

std::string table_header(const std::vector<std::string>& peers);
std::string table_row(const ShapeResult& r, const std::vector<std::string>& peers);

// Geometric mean and minimum of tessera / best peer, per thread count and overall.
nlohmann::json summary(const std::vector<ShapeResult>& results);
nlohmann::json to_json(const std::vector<ShapeResult>& results, const std::string& command);
std::string to_svg(const std::vector<ShapeResult>& results, const std::string& title);

// Writes through a temporary file renamed into place, so a failed run never leaves a partial report.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace tessera::bench
