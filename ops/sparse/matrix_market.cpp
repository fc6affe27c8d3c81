// Matrix Market coordinate files: a reader that names the line of anything malformed, and a writer that never
// leaves a partial file.
#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "generator/core/error.hpp"
#include "tessera/sparse.hpp"

namespace tessera {

namespace {

constexpr std::int64_t kMaxSide = std::int64_t{1} << 40;
// Entries reserved up front at most: a header that lies about its count cannot make the reader allocate it.
constexpr std::int64_t kMaxReserve = std::int64_t{1} << 24;

enum class Field { Real, Integer, Pattern };
enum class Symmetry { General, Symmetric, SkewSymmetric };

class Reader {
 public:
  Reader(std::istream& in, const std::string& name) : in_(in), name_(name) {}

  CooMatrix read() {
    std::string line;
    if (!next_line(line)) fail("empty file (expected a %%MatrixMarket header)");
    header(line);
    // Comments, then the size line.
    do {
      if (!next_line(line)) fail("missing the size line 'rows cols entries'");
    } while (line.empty() || line[0] == '%');
    std::string_view rest = line;
    CooMatrix coo;
    coo.rows = integer(rest, "rows");
    coo.cols = integer(rest, "cols");
    const std::int64_t count = integer(rest, "entries");
    end_of_line(rest);
    if (coo.rows < 0 || coo.cols < 0 || coo.rows > kMaxSide || coo.cols > kMaxSide)
      fail(fmt::format("matrix sides must be in 0..2^40, got {}x{}", coo.rows, coo.cols));
    if (count < 0) fail(fmt::format("negative entry count {}", count));
    if (symmetry_ != Symmetry::General && coo.rows != coo.cols)
      fail(fmt::format("a {} matrix must be square, got {}x{}",
                       symmetry_ == Symmetry::Symmetric ? "symmetric" : "skew-symmetric", coo.rows, coo.cols));
    if (static_cast<double>(count) > static_cast<double>(coo.rows) * static_cast<double>(coo.cols))
      fail(fmt::format("{} entries cannot fit a {}x{} matrix", count, coo.rows, coo.cols));
    const auto reserve =
        static_cast<std::size_t>(std::min(count, kMaxReserve) * (symmetry_ == Symmetry::General ? 1 : 2));
    coo.row.reserve(reserve);
    coo.col.reserve(reserve);
    coo.value.reserve(reserve);
    for (std::int64_t e = 0; e < count; ++e) {
      do {
        if (!next_line(line))
          fail(fmt::format("the file ends after {} of the {} entries the size line promises", e, count));
      } while (blank(line));
      rest = line;
      const std::int64_t i = integer(rest, "row index"), j = integer(rest, "column index");
      double v = 1;
      if (field_ != Field::Pattern) v = real(rest);
      end_of_line(rest);
      if (i < 1 || i > coo.rows || j < 1 || j > coo.cols)
        fail(fmt::format("entry ({}, {}) lies outside the {}x{} matrix (indices are 1-based)", i, j, coo.rows,
                         coo.cols));
      if (symmetry_ != Symmetry::General && j > i)
        fail(fmt::format("entry ({}, {}) is above the diagonal of a {} matrix (only the lower triangle is stored)", i,
                         j, symmetry_ == Symmetry::Symmetric ? "symmetric" : "skew-symmetric"));
      if (symmetry_ == Symmetry::SkewSymmetric && i == j) fail("a skew-symmetric matrix has no diagonal entries");
      add(coo, i - 1, j - 1, v);
      if (symmetry_ != Symmetry::General && i != j) add(coo, j - 1, i - 1, symmetry_ == Symmetry::Symmetric ? v : -v);
    }
    while (next_line(line))
      if (!blank(line)) fail(fmt::format("more entries than the {} the size line promises", count));
    return coo;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument("matrix", fmt::format("{}:{}: {}", name_, line_number_, what));
  }
  bool next_line(std::string& line) {
    if (!std::getline(in_, line)) {
      if (in_.bad()) fail("read error");
      return false;
    }
    ++line_number_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  }
  static bool blank(const std::string& line) {
    return std::all_of(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c); });
  }
  static std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  static std::string_view token(std::string_view& rest) {
    std::size_t b = 0;
    while (b < rest.size() && (rest[b] == ' ' || rest[b] == '\t')) ++b;
    std::size_t e = b;
    while (e < rest.size() && rest[e] != ' ' && rest[e] != '\t') ++e;
    const std::string_view t = rest.substr(b, e - b);
    rest.remove_prefix(e);
    return t;
  }
  void header(const std::string& line) {
    std::string_view rest = line;
    const std::string banner = lower(std::string(token(rest)));
    const std::string object = lower(std::string(token(rest))), format = lower(std::string(token(rest)));
    const std::string field = lower(std::string(token(rest))), symmetry = lower(std::string(token(rest)));
    if (banner != "%%matrixmarket") fail("the first line must start with %%MatrixMarket");
    if (object != "matrix") fail("only 'matrix' objects are read, got '" + object + "'");
    if (format != "coordinate") fail("only the 'coordinate' format is read, got '" + format + "'");
    if (field == "real" || field == "double")
      field_ = Field::Real;
    else if (field == "integer")
      field_ = Field::Integer;
    else if (field == "pattern")
      field_ = Field::Pattern;
    else
      fail("the field must be real, integer or pattern, got '" + field + "'");
    if (symmetry == "general")
      symmetry_ = Symmetry::General;
    else if (symmetry == "symmetric")
      symmetry_ = Symmetry::Symmetric;
    else if (symmetry == "skew-symmetric")
      symmetry_ = Symmetry::SkewSymmetric;
    else
      fail("the symmetry must be general, symmetric or skew-symmetric, got '" + symmetry + "'");
    end_of_line(rest);
  }
  std::int64_t integer(std::string_view& rest, const char* what) {
    const std::string_view t = token(rest);
    if (t.empty()) fail(fmt::format("missing the {}", what));
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size())
      fail(fmt::format("the {} '{}' is not an integer in range", what, t));
    return v;
  }
  double real(std::string_view& rest) {
    const std::string_view t = token(rest);
    if (t.empty()) fail("missing the value");
    double v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size()) fail(fmt::format("the value '{}' is not a number", t));
    // Whole and within 64 bits (a cast of anything else is undefined), NaN and infinities refused with them.
    if (field_ == Field::Integer && !(std::fabs(v) < 0x1p63 && v == std::trunc(v)))
      fail(fmt::format("the value '{}' is not a 64-bit integer (the field is 'integer')", t));
    return v;
  }
  void end_of_line(std::string_view rest) {
    const std::string_view t = token(rest);
    if (!t.empty()) fail(fmt::format("unexpected '{}' at the end of the line", t));
  }
  static void add(CooMatrix& coo, std::int64_t i, std::int64_t j, double v) {
    coo.row.push_back(i);
    coo.col.push_back(j);
    coo.value.push_back(v);
  }

  std::istream& in_;
  std::string name_;
  std::int64_t line_number_ = 0;
  Field field_ = Field::Real;
  Symmetry symmetry_ = Symmetry::General;
};

}  // namespace

CooMatrix read_matrix_market(std::istream& in, const std::string& name) { return Reader(in, name).read(); }

CooMatrix read_matrix_market(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument("matrix", path + ": cannot be opened");
  return read_matrix_market(in, path);
}

void write_matrix_market(const std::string& path, const CooMatrix& coo) {
  if (coo.row.size() != coo.col.size() || coo.row.size() != coo.value.size())
    throw InvalidArgument("matrix", "row, col and value lists differ in length");
  for (std::size_t e = 0; e < coo.row.size(); ++e)
    if (coo.row[e] < 0 || coo.row[e] >= coo.rows || coo.col[e] < 0 || coo.col[e] >= coo.cols)
      throw InvalidArgument("matrix", fmt::format("entry {} lies outside the {}x{} matrix", e, coo.rows, coo.cols));
  const std::string temporary = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* f = std::fopen(temporary.c_str(), "w");
  if (!f) throw InvalidArgument("output", path + ": cannot be written");
  bool ok = std::fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%lld %lld %zu\n",
                         static_cast<long long>(coo.rows), static_cast<long long>(coo.cols), coo.row.size()) > 0;
  // %.17g: every double reads back exactly.
  for (std::size_t e = 0; ok && e < coo.row.size(); ++e)
    ok = std::fprintf(f, "%lld %lld %.17g\n", static_cast<long long>(coo.row[e] + 1),
                      static_cast<long long>(coo.col[e] + 1), coo.value[e]) > 0;
  ok = std::fclose(f) == 0 && ok;
  std::error_code ec;
  if (ok) std::filesystem::rename(temporary, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(temporary, ec);
    throw InvalidArgument("output", path + ": writing failed (nothing was written)");
  }
}

}  // namespace tessera
