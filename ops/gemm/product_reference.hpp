// What the references of GEMM-shaped products share: D = epilogue(A·B, C, inputs) and each element's tolerance, from
// each row's sums. The dense GEMM reference and the SpMM one differ only in how a row's sums are made.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tessera/reference.hpp"

namespace tessera {

// One row of A·B before the epilogue: per column, the sum of the products and the sum of their magnitudes.
struct ProductRow {
  std::vector<double> acc, magnitude;  // zeroed, one per column of D, before each call
  double terms = 0;                    // how many products a sum adds: f32 rounding grows with it
};

// Fills a row's sums: called for each batch item and row in order.
using ProductRows = std::function<void(std::int64_t batch, std::int64_t row, ProductRow& out)>;

// The reference of D from A·B's rows: g gives D, C, the epilogue, alpha, beta, the inputs and the operands' dtypes
// (tf32 and int8 products round differently); g.a and g.b are not read.
GemmReference reference_from_products(const GemmArgs& g, const ProductRows& products);

}  // namespace tessera
