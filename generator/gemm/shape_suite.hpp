// Shape suites shared by benchmarks, tests and the tuner: files of "M N K [batch]" lines, where a comment line
// "# family: NAME [b-cold] [a-col] [b-col]" names the family of the shapes after it (the file's stem until then),
// whether the tuner times them with B evicted from the caches before each call, and which operands are column-major
// (row-major unless said; a family that names none takes the tuner's --layout-a/--layout-b); or "MxNxK[xB]" lists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct SuiteShape {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  std::string family;
  bool cold_b = false;                // timed with B evicted before each call (TuneOptions::cold_b)
  bool a_col = false, b_col = false;  // the family's operands are column-major
  bool layouts_given() const { return a_col || b_col; }
};

// A path, or the name of a file in `suites_dir` ("square" → suites_dir/square.txt). Throws InvalidArgument naming
// the file and line of anything that is not a shape.
std::vector<SuiteShape> load_shape_suite(const std::string& path_or_name, const std::string& suites_dir);
// "64x64x64,1x4096x4096,16x16x16x1024" (family "list").
std::vector<SuiteShape> parse_shape_list(const std::string& list);

}  // namespace tessera
