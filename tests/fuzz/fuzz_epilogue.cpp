// Epilogue text (GEMM's and SDDMM's sampled dialect) and attention's score modifiers: any bytes either parse or
// throw tessera::Error; a text that parses prints as text that parses again to the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "generator/attention/score_modifier.hpp"
#include "generator/core/epilogue.hpp"
#include "generator/core/error.hpp"

namespace {

template <class Parse>
void round_trip(std::string_view text, Parse parse) {
  try {
    const auto parsed = parse(text);
    if (parse(parsed.text()).text() != parsed.text()) std::abort();  // printing is not a fixed point
  } catch (const tessera::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  round_trip(text, [](std::string_view t) { return tessera::Epilogue::parse(t); });
  round_trip(text, [](std::string_view t) { return tessera::Epilogue::parse_sampled(t); });
  round_trip(text, [](std::string_view t) { return tessera::ScoreModifier::parse(t); });
  return 0;
}
