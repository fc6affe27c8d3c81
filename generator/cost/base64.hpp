// Base64 (RFC 4648, padded) for binary arrays kept inside JSON documents: a cost model's forests are ~170k nodes,
// and as base64 strings they load ~5× faster than as JSON numbers (nlohmann parses a string at memcpy-like speed,
// a number through strtod).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

std::string base64_encode(const void* data, std::size_t bytes);
// The decoded bytes, or nothing when `text` is not padded base64 (a wrong character, a length not a multiple of 4,
// padding anywhere but at the end).
std::optional<std::vector<std::uint8_t>> base64_decode(std::string_view text);

}  // namespace tessera
