// Helpers for the test suites: owned matrices with a layout and padding, filled with exact small integers or floats.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "tessera/tessera.hpp"

namespace tessera::test {

// A batch of rows×cols matrices with leading-dimension padding and batch padding, so strides are never minimal
// by accident; the padding holds NaN so any read of it shows.
struct Matrix {
  std::vector<float> storage;
  Tensor view;

  Matrix(std::int64_t batch, std::int64_t rows, std::int64_t cols, Layout layout, std::int64_t pad = 3,
         bool batched = false) {
    const bool row = layout.kind() == LayoutKind::RowMajor;
    const std::int64_t ld = (row ? cols : rows) + pad;
    const std::int64_t one = (row ? rows : cols) * ld + pad;
    storage.assign(static_cast<std::size_t>(std::max<std::int64_t>(1, batch * one)),
                   std::numeric_limits<float>::quiet_NaN());
    if (batched || batch != 1)
      view = Tensor::batched(storage.data(), batch, rows, cols, layout, ld, one);
    else
      view = Tensor::matrix(storage.data(), rows, cols, layout, ld);
  }

  float& at(std::int64_t b, std::int64_t r, std::int64_t c) {
    const std::size_t k = view.rank() - 2;
    std::int64_t off = r * view.strides[k] + c * view.strides[k + 1];
    if (view.rank() == 3) off += b * view.strides[0];
    return storage[static_cast<std::size_t>(off)];
  }

  template <class F>
  void each(F f) {
    const std::int64_t batch = view.rank() == 3 ? view.shape[0] : 1;
    const std::size_t k = view.rank() - 2;
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t r = 0; r < view.shape[k]; ++r)
        for (std::int64_t c = 0; c < view.shape[k + 1]; ++c) f(at(b, r, c));
  }

  // Integers in [-range, range]: f32 sums of their products are exact while they stay below 2^24.
  void fill_integers(std::mt19937& rng, int range = 3) {
    std::uniform_int_distribution<int> dist(-range, range);
    each([&](float& x) { x = static_cast<float>(dist(rng)); });
  }
  void fill_uniform(std::mt19937& rng, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> dist(lo, hi);
    each([&](float& x) { x = dist(rng); });
  }
  void fill(float value) {
    each([&](float& x) { x = value; });
  }
};

// Elements that end exactly where an inaccessible page begins (or start right after one): a generated kernel that
// reads or writes one element past an operand faults instead of passing by luck.
template <class T>
class Guarded {
 public:
  explicit Guarded(std::size_t count, bool at_start = false) : count_(count) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t bytes = (count * sizeof(T) + page - 1) / page * page;
    size_ = bytes + 2 * page;
    base_ = static_cast<char*>(::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ::mprotect(base_, page, PROT_NONE);
    ::mprotect(base_ + page + bytes, page, PROT_NONE);
    data_ = reinterpret_cast<T*>(at_start ? base_ + page : base_ + page + bytes - count * sizeof(T));
  }
  ~Guarded() { ::munmap(base_, size_); }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  T* data() { return data_; }
  std::size_t size() const { return count_; }

 private:
  std::size_t count_, size_;
  char* base_;
  T* data_;
};

}  // namespace tessera::test

namespace tessera {
// Readable test parameter names in GoogleTest output.
inline void PrintTo(const Layout& layout, std::ostream* os) { *os << layout.name(); }
}  // namespace tessera
