// Shape suites shared by benchmarks, tests and the tuner: files of "M N K [batch]" lines, or "MxNxK[xB]" lists.
#pragma once

#include <string>
#include <vector>

#include "bench/gemm_peer.hpp"

namespace tessera::bench {

// A path, or the name of a file in bench/suites/ ("square" → bench/suites/square.txt).
std::vector<GemmShape> load_suite(const std::string& path_or_name);
// "64x64x64,1x4096x4096,16x16x16x1024".
std::vector<GemmShape> parse_shapes(const std::string& list);

}  // namespace tessera::bench
