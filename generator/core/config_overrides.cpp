#include "generator/core/config_overrides.hpp"

#include <charconv>

#include "generator/core/error.hpp"

namespace tessera {

std::vector<std::pair<std::string, int>> parse_config_overrides(const std::string& text) {
  std::vector<std::pair<std::string, int>> items;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    start = end + 1;
    const std::size_t eq = item.find('=');
    int value = 0;
    const char* first = eq == std::string::npos ? nullptr : item.data() + eq + 1;
    const auto [ptr, ec] = first ? std::from_chars(first, item.data() + item.size(), value)
                                 : std::from_chars_result{nullptr, std::errc::invalid_argument};
    if (ec != std::errc() || ptr != item.data() + item.size() || eq == 0)
      throw InvalidArgument("config", "expected key=integer, got '" + item + "'");
    items.emplace_back(item.substr(0, eq), value);
  }
  return items;
}

}  // namespace tessera
