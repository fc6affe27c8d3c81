#include "generator/cost/base64.hpp"

#include <array>

namespace tessera {

namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Each character's 6-bit value, 64 for '=' and 255 for anything else.
constexpr std::array<std::uint8_t, 256> decoding_table() {
  std::array<std::uint8_t, 256> table{};
  for (auto& v : table) v = 255;
  for (std::uint8_t i = 0; i < 64; ++i) table[static_cast<unsigned char>(kAlphabet[i])] = i;
  table['='] = 64;
  return table;
}
constexpr auto kDecoding = decoding_table();
}  // namespace

std::string base64_encode(const void* data, std::size_t bytes) {
  const auto* in = static_cast<const std::uint8_t*>(data);
  std::string out;
  out.reserve((bytes + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes; i += 3) {
    const std::uint32_t b0 = in[i], b1 = i + 1 < bytes ? in[i + 1] : 0, b2 = i + 2 < bytes ? in[i + 2] : 0;
    const std::uint32_t word = b0 << 16 | b1 << 8 | b2;
    out += kAlphabet[word >> 18 & 63];
    out += kAlphabet[word >> 12 & 63];
    out += i + 1 < bytes ? kAlphabet[word >> 6 & 63] : '=';
    out += i + 2 < bytes ? kAlphabet[word & 63] : '=';
  }
  return out;
}

std::optional<std::vector<std::uint8_t>> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::vector<std::uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    std::uint8_t v[4];
    for (int j = 0; j < 4; ++j) v[j] = kDecoding[static_cast<unsigned char>(text[i + static_cast<std::size_t>(j)])];
    const bool last = i + 4 == text.size();
    // '=' only as the last one or two characters of the last group.
    const int padding = (v[3] == 64) + (v[2] == 64);
    if (v[0] > 63 || v[1] > 63 || v[2] == 255 || v[3] == 255 || (padding > 0 && !last) || (v[2] == 64 && v[3] != 64))
      return std::nullopt;
    const std::uint32_t word = std::uint32_t{v[0]} << 18 | std::uint32_t{v[1]} << 12 | std::uint32_t{v[2] & 63u} << 6 |
                               std::uint32_t{v[3] & 63u};
    out.push_back(static_cast<std::uint8_t>(word >> 16));
    if (padding < 2) out.push_back(static_cast<std::uint8_t>(word >> 8 & 255));
    if (padding < 1) out.push_back(static_cast<std::uint8_t>(word & 255));
  }
  return out;
}

}  // namespace tessera
