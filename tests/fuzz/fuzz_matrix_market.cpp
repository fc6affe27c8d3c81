// Matrix Market files: any bytes either read as a matrix whose entries lie inside its shape, or throw tessera::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "generator/core/error.hpp"
#include "tessera/sparse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const tessera::CooMatrix coo = tessera::read_matrix_market(in, "fuzz.mtx");
    if (coo.row.size() != coo.col.size() || coo.row.size() != coo.value.size()) std::abort();
    for (std::size_t e = 0; e < coo.row.size(); ++e)
      if (coo.row[e] < 0 || coo.row[e] >= coo.rows || coo.col[e] < 0 || coo.col[e] >= coo.cols) std::abort();
  } catch (const tessera::Error&) {
  }
  return 0;
}
