// Spec JSON (what records, caches and libraries hold): any bytes either give a spec or throw tessera::Error; a spec
// that parses serialises to JSON that parses to the same spec (the same hash).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "generator/attention/attention_json.hpp"
#include "generator/core/error.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/sparse/sparse_json.hpp"

namespace {

template <class Spec>
void round_trip(const nlohmann::json& j) {
  try {
    const Spec spec = tessera::from_json<Spec>(j);
    const Spec again = tessera::from_json<Spec>(nlohmann::json::parse(tessera::to_json(spec).dump()));
    if (!(again.hash() == spec.hash())) std::abort();
  } catch (const tessera::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  round_trip<tessera::CpuGemmSpec>(j);
  round_trip<tessera::CudaGemmSpec>(j);
  round_trip<tessera::CpuAttentionSpec>(j);
  round_trip<tessera::CpuSpmmSpec>(j);
  round_trip<tessera::CpuSddmmSpec>(j);
  return 0;
}
