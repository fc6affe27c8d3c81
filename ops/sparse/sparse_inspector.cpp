// The inspector: a pattern's structure checked, its statistics, and its block rows split into tasks of equal work.
#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <mutex>

#include "generator/core/error.hpp"
#include "generator/core/sparse_format.hpp"
#include "generator/cost/sparse_cost.hpp"
#include "tessera/sparse.hpp"

namespace tessera {

namespace {

// Tasks per thread: enough that the pool's dynamic hand-out evens out what the cost estimate misses.
constexpr std::int64_t kTasksPerThread = 8;
// What a block row costs beside its entries, in entries (the tile set-up and the epilogue's stores).
constexpr std::int64_t kRowCost = 2;

std::uint64_t pattern_hash(const SparseMatrix& m) {
  XXH3_state_t* state = XXH3_createState();
  if (!state) throw std::bad_alloc();
  XXH3_64bits_reset(state);
  const auto bytes = static_cast<std::size_t>(m.index_bits / 8);
  XXH3_64bits_update(state, m.row_offsets, static_cast<std::size_t>(m.block_row_count() + 1) * bytes);
  if (m.entries > 0) XXH3_64bits_update(state, m.col_indices, static_cast<std::size_t>(m.entries) * bytes);
  const std::uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return h;
}

}  // namespace

struct SparsePlan::PanelCache {
  std::mutex mutex;
  std::map<std::int64_t, std::shared_ptr<const std::vector<SparseMatrixData>>> by_width;
  std::map<std::pair<int, int>, std::shared_ptr<const Blocked>> blocked;  // by the blocks' rows and columns
};

std::shared_ptr<const SparsePlan::Blocked> SparsePlan::blocked(const SparseMatrix& m, int threads, std::int64_t n,
                                                               int max_side) const {
  int rows = 1, cols = 1;
  if (m.format == SparseFormat::Csr) {
    rows = cols = square_block_for(stats_, n, max_side);
  } else if (m.block_rows > max_side) {
    // Blocks taller than the target's register tile holds, split into blocks of the largest power-of-two height
    // that fits (16x16 on AVX2: 8x16).
    rows = static_cast<int>(std::bit_floor(static_cast<unsigned>(max_side)));
    cols = m.block_cols;
  }
  if (rows <= 1 && cols <= 1) return nullptr;
  std::lock_guard lock(panels_->mutex);
  auto& blocked = panels_->blocked[{rows, cols}];
  if (!blocked) {
    auto b = std::make_shared<Blocked>();
    b->data = SparseMatrixData::bsr(SparseMatrixData::coo(m), rows, cols, m.index_bits, m.value);
    b->plan = std::make_shared<const SparsePlan>(SparsePlan::inspect(b->data.view(), threads));
    blocked = std::move(b);
  }
  return blocked;
}

std::shared_ptr<const std::vector<SparseMatrixData>> SparsePlan::column_panels(const SparseMatrix& m,
                                                                               std::int64_t width) const {
  std::lock_guard lock(panels_->mutex);
  auto& panels = panels_->by_width[width];
  if (!panels) {
    auto built = std::make_shared<std::vector<SparseMatrixData>>();
    for (std::int64_t first = 0; first < m.block_col_count(); first += width)
      built->push_back(SparseMatrixData::column_panel(m, first, std::min(first + width, m.block_col_count())));
    panels = std::move(built);
  }
  return panels;
}

SparsePlan SparsePlan::inspect(const SparseMatrix& m, int threads, const std::string& name) {
  const auto arg = [&](const char* part) { return name + part; };
  m.signature().check();
  if (m.rows < 0 || m.cols < 0) throw InvalidArgument(name, fmt::format("has a negative shape {}x{}", m.rows, m.cols));
  if (m.rows > (std::int64_t{1} << 40) || m.cols > (std::int64_t{1} << 40))
    throw InvalidArgument(name, "sides must be at most 2^40");
  if (m.entries < 0) throw InvalidArgument(arg(".entries"), fmt::format("is negative ({})", m.entries));
  if (m.row_offsets == nullptr) throw InvalidArgument(arg(".row_offsets"), "is null");
  if (m.entries > 0 && m.col_indices == nullptr) throw InvalidArgument(arg(".col_indices"), "is null");
  const std::int64_t block_rows = m.block_row_count(), block_cols = m.block_col_count();
  if (m.index_bits == 32 && (m.entries > INT32_MAX || block_cols > INT32_MAX))
    throw InvalidArgument(name, "too large for 32-bit indices");

  SparsePlan plan;
  plan.panels_ = std::make_shared<PanelCache>();
  plan.signature_ = m.signature();
  plan.rows_ = m.rows;
  plan.cols_ = m.cols;
  PatternStats& s = plan.stats_;
  s.rows = block_rows;
  s.nnz = m.entries;
  if (sparse_index_at(m.row_offsets, m.index_bits, 0) != 0)
    throw InvalidArgument(arg(".row_offsets"), fmt::format("must start at 0, starts at {}",
                                                           sparse_index_at(m.row_offsets, m.index_bits, 0)));
  // Offsets first (so that a broken one is named as such), then each row's indices.
  for (std::int64_t r = 0; r < block_rows; ++r) {
    const std::int64_t first = sparse_index_at(m.row_offsets, m.index_bits, r);
    const std::int64_t end = sparse_index_at(m.row_offsets, m.index_bits, r + 1);
    if (end < first)
      throw InvalidArgument(arg(".row_offsets"),
                            fmt::format("decrease at row {}: {} then {} (offsets must not decrease)", r, first, end));
    if (end > m.entries)
      throw InvalidArgument(arg(".row_offsets"),
                            fmt::format("[{}] = {} exceeds the {} entries", r + 1, end, m.entries));
  }
  double sum_sq = 0;
  for (std::int64_t r = 0; r < block_rows; ++r) {
    const std::int64_t first = sparse_index_at(m.row_offsets, m.index_bits, r);
    const std::int64_t end = sparse_index_at(m.row_offsets, m.index_bits, r + 1);
    std::int64_t previous = -1;
    for (std::int64_t p = first; p < end; ++p) {
      const std::int64_t c = sparse_index_at(m.col_indices, m.index_bits, p);
      if (c < 0 || c >= block_cols)
        throw InvalidArgument(arg(".col_indices"),
                              fmt::format("[{}] = {} (row {}) is outside 0..{}", p, c, r, block_cols - 1));
      if (c <= previous)
        throw InvalidArgument(arg(".col_indices"),
                              fmt::format("[{}] = {} (row {}) {} the previous {}: indices must be sorted and distinct "
                                          "within a row (SparseMatrixData::csr sorts and sums duplicates)",
                                          p, c, r, c == previous ? "repeats" : "is below", previous));
      previous = c;
    }
    const std::int64_t length = end - first;
    s.max_row = std::max(s.max_row, length);
    s.empty_rows += length == 0;
    sum_sq += static_cast<double>(length) * static_cast<double>(length);
  }
  const std::int64_t last = sparse_index_at(m.row_offsets, m.index_bits, block_rows);
  if (last != m.entries)
    throw InvalidArgument(arg(".entries"), fmt::format("is {}, but the row offsets end at {}", m.entries, last));
  if (block_rows > 0) {
    s.mean_row = static_cast<double>(m.entries) / static_cast<double>(block_rows);
    s.stddev_row = std::sqrt(std::max(0.0, sum_sq / static_cast<double>(block_rows) - s.mean_row * s.mean_row));
  }
  if (m.format == SparseFormat::Bsr && m.entries > 0 && m.values) {  // a pattern without values: blocks taken as full
    const std::int64_t per_block = std::int64_t{m.block_rows} * m.block_cols;
    std::int64_t nonzero = 0;
    for (std::int64_t i = 0; i < m.entries * per_block; ++i) {
      const double v = m.value == DType::f32 ? static_cast<const float*>(m.values)[i]
                                             : static_cast<double>(static_cast<const std::uint16_t*>(m.values)[i] != 0);
      nonzero += v != 0;
    }
    s.block_fill = static_cast<double>(nonzero) / static_cast<double>(m.entries * per_block);
  }

  // How the entries cluster into square blocks of each side.
  if (m.format == SparseFormat::Csr && m.entries > 0) {
    for (std::size_t i = 0; i < PatternStats::kSquareBlockSides.size(); ++i) {
      const int side = PatternStats::kSquareBlockSides[i];
      if (m.rows < side || m.cols < side) continue;
      std::vector<std::int64_t> stamp(static_cast<std::size_t>((m.cols + side - 1) / side), -1);
      std::int64_t blocks = 0;
      for (std::int64_t r = 0; r < m.rows; ++r)
        for (std::int64_t p = sparse_index_at(m.row_offsets, m.index_bits, r);
             p < sparse_index_at(m.row_offsets, m.index_bits, r + 1); ++p) {
          auto& seen = stamp[static_cast<std::size_t>(sparse_index_at(m.col_indices, m.index_bits, p) / side)];
          if (seen != r / side) seen = r / side, ++blocks;
        }
      s.square_block_fill[i] = static_cast<double>(m.entries) / (static_cast<double>(blocks) * side * side);
    }
  }

  // Block rows split at equal shares of the estimated work; a row heavier than a share is a task of its own.
  const std::int64_t tasks = threads <= 1 ? 1 : std::min<std::int64_t>(kTasksPerThread * threads, block_rows);
  const double total = static_cast<double>(m.entries + kRowCost * block_rows);
  plan.splits_.push_back(0);
  std::int64_t done = 0;  // cost of the rows before r
  for (std::int64_t r = 0; r < block_rows; ++r) {
    const std::int64_t cost = sparse_index_at(m.row_offsets, m.index_bits, r + 1) -
                              sparse_index_at(m.row_offsets, m.index_bits, r) + kRowCost;
    const double boundary = total * static_cast<double>(plan.splits_.size()) / static_cast<double>(tasks);
    if (r > plan.splits_.back() && static_cast<double>(done) >= boundary) plan.splits_.push_back(r);
    done += cost;
  }
  if (block_rows > 0) plan.splits_.push_back(block_rows);
  // Rows by decreasing length, ties in row order: a counting sort over the lengths.
  if (block_rows <= INT32_MAX) {
    std::vector<std::int64_t> first_of_length(static_cast<std::size_t>(s.max_row) + 2, 0);
    const auto length = [&](std::int64_t r) {
      return sparse_index_at(m.row_offsets, m.index_bits, r + 1) - sparse_index_at(m.row_offsets, m.index_bits, r);
    };
    for (std::int64_t r = 0; r < block_rows; ++r)
      ++first_of_length[static_cast<std::size_t>(s.max_row - length(r) + 1)];
    for (std::size_t i = 1; i < first_of_length.size(); ++i) first_of_length[i] += first_of_length[i - 1];
    plan.row_order_.resize(static_cast<std::size_t>(block_rows));
    for (std::int64_t r = 0; r < block_rows; ++r)
      plan.row_order_[static_cast<std::size_t>(first_of_length[static_cast<std::size_t>(s.max_row - length(r))]++)] =
          static_cast<std::int32_t>(r);
  }
  plan.fingerprint_ = pattern_hash(m);
  return plan;
}

bool SparsePlan::matches_shape(const SparseMatrix& m) const {
  return m.signature() == signature_ && m.rows == rows_ && m.cols == cols_ && m.entries == stats_.nnz;
}

bool SparsePlan::describes(const SparseMatrix& m) const {
  return matches_shape(m) && m.row_offsets != nullptr && pattern_hash(m) == fingerprint_;
}

}  // namespace tessera
