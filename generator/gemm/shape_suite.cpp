#include "generator/gemm/shape_suite.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "generator/core/error.hpp"

namespace tessera {

namespace {
SuiteShape checked(const std::vector<std::int64_t>& v, const std::string& where, const std::string& family) {
  if (v.size() != 3 && v.size() != 4) throw InvalidArgument(where, "expected M N K or M N K batch");
  for (auto x : v)
    if (x < 1 || x > (std::int64_t{1} << 20)) throw InvalidArgument(where, "sizes must be in 1..2^20");
  SuiteShape s{v[0], v[1], v[2], v.size() == 4 ? v[3] : 1, family};
  if (static_cast<double>(s.batch) * static_cast<double>(std::max({s.m * s.k, s.k * s.n, s.m * s.n})) > 1 << 29)
    throw InvalidArgument(where, "an operand over 2^29 elements is too large to run here");
  return s;
}

std::int64_t number(const std::string& word, const std::string& where) {
  try {
    std::size_t used = 0;
    const std::int64_t value = std::stoll(word, &used);
    if (used == word.size()) return value;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(where, "'" + word + "' is not a size");
}
}  // namespace

std::vector<SuiteShape> load_shape_suite(const std::string& path_or_name, const std::string& suites_dir) {
  std::filesystem::path path(path_or_name);
  if (!std::filesystem::exists(path) && path_or_name.find('/') == std::string::npos)
    path = std::filesystem::path(suites_dir) / (path_or_name + ".txt");
  std::ifstream in(path);
  if (!in) throw InvalidArgument("--suite", "cannot read '" + path_or_name + "'");
  std::vector<SuiteShape> shapes;
  std::string family = path.stem().string(), line;
  SuiteShape attributes;  // of the current family
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    const std::string where = fmt::format("{}:{}", path.string(), line_number);
    if (const auto hash = line.find('#'); hash != std::string::npos) {
      std::istringstream comment(line.substr(hash + 1));
      std::string key, name;
      if (comment >> key >> name && key == "family:") {
        family = name;
        attributes = SuiteShape{};
        for (std::string attribute; comment >> attribute;) {
          if (attribute == "b-cold")
            attributes.cold_b = true;
          else if (attribute == "a-col")
            attributes.a_col = true;
          else if (attribute == "b-col")
            attributes.b_col = true;
          else
            throw InvalidArgument(
                "--suite",
                fmt::format("{}: unknown family attribute '{}' (known: b-cold, a-col, b-col)", where, attribute));
        }
      }
      line = line.substr(0, hash);
    }
    std::istringstream words(line);
    std::vector<std::int64_t> v;
    for (std::string word; words >> word;) v.push_back(number(word, where));
    if (!v.empty()) {
      shapes.push_back(checked(v, where, family));
      shapes.back().cold_b = attributes.cold_b;
      shapes.back().a_col = attributes.a_col;
      shapes.back().b_col = attributes.b_col;
    }
  }
  if (shapes.empty()) throw InvalidArgument("--suite", "'" + path.string() + "' lists no shapes");
  return shapes;
}

std::vector<SuiteShape> parse_shape_list(const std::string& list) {
  std::vector<SuiteShape> shapes;
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    std::vector<std::int64_t> v;
    std::istringstream parts(item);
    for (std::string part; std::getline(parts, part, 'x');) {
      try {
        v.push_back(number(part, "--shapes"));
      } catch (const InvalidArgument&) {
        throw InvalidArgument("--shapes", "'" + item + "' is not MxNxK or MxNxKxBATCH");
      }
    }
    shapes.push_back(checked(v, "--shapes " + item, "list"));
  }
  if (shapes.empty()) throw InvalidArgument("--shapes", "no shapes given");
  return shapes;
}

}  // namespace tessera
