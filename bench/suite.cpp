#include "bench/suite.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "generator/error.hpp"

namespace tessera::bench {

namespace {

GemmShape checked(std::vector<std::int64_t> v, const std::string& where) {
  if (v.size() != 3 && v.size() != 4) throw InvalidArgument(where, "expected M N K or M N K batch");
  for (auto x : v)
    if (x < 1 || x > (std::int64_t{1} << 20)) throw InvalidArgument(where, "sizes must be in 1..2^20");
  GemmShape s{v[0], v[1], v[2], v.size() == 4 ? v[3] : 1};
  if (static_cast<double>(s.batch) * static_cast<double>(std::max({s.m * s.k, s.k * s.n, s.m * s.n})) > 1 << 29)
    throw InvalidArgument(where, "an operand over 2^29 elements is too large to benchmark here");
  return s;
}

}  // namespace

std::string GemmShape::label() const {
  return batch == 1 ? fmt::format("{}x{}x{}", m, n, k) : fmt::format("{}x{}x{}x{}", m, n, k, batch);
}

std::vector<GemmShape> load_suite(const std::string& path_or_name) {
  std::filesystem::path path(path_or_name);
  if (!std::filesystem::exists(path) && path_or_name.find('/') == std::string::npos)
    path = std::filesystem::path(TESSERA_SOURCE_DIR) / "bench" / "suites" / (path_or_name + ".txt");
  std::ifstream in(path);
  if (!in) throw InvalidArgument("--suite", "cannot read '" + path_or_name + "'");
  std::vector<GemmShape> shapes;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::vector<std::int64_t> v;
    std::string word;
    while (words >> word) {
      try {
        std::size_t used = 0;
        v.push_back(std::stoll(word, &used));
        if (used != word.size()) throw std::invalid_argument(word);
      } catch (const std::exception&) {
        throw InvalidArgument(fmt::format("{}:{}", path.string(), number), "'" + word + "' is not a size");
      }
    }
    if (!v.empty()) shapes.push_back(checked(v, fmt::format("{}:{}", path.string(), number)));
  }
  if (shapes.empty()) throw InvalidArgument("--suite", "'" + path.string() + "' lists no shapes");
  return shapes;
}

std::vector<GemmShape> parse_shapes(const std::string& list) {
  std::vector<GemmShape> shapes;
  std::istringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    std::vector<std::int64_t> v;
    std::istringstream parts(item);
    std::string part;
    while (std::getline(parts, part, 'x')) {
      try {
        std::size_t used = 0;
        v.push_back(std::stoll(part, &used));
        if (used != part.size()) throw std::invalid_argument(part);
      } catch (const std::exception&) {
        throw InvalidArgument("--shapes", "'" + item + "' is not MxNxK or MxNxKxBATCH");
      }
    }
    shapes.push_back(checked(v, "--shapes " + item));
  }
  if (shapes.empty()) throw InvalidArgument("--shapes", "no shapes given");
  return shapes;
}

}  // namespace tessera::bench
