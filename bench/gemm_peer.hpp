// A GEMM implementation the benchmark measures: tessera itself or a peer library, behind one interface.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace tessera::bench {

// The element types of A and B (C is f32): f32, bf16, or int8 — u8 A and i8 B with i32 sums, as quantised
// inference multiplies activations by weights.
enum class GemmInputs { f32, bf16, int8 };
std::string_view gemm_inputs_name(GemmInputs inputs);

// C[b] = A[b]·B[b] for b < batch; packed, f32, alpha = 1, beta = 0; C row-major, A and B row-major unless
// stored column-major (B column-major is x·Wᵀ with W as nn.Linear keeps it: N rows of K).
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  GemmInputs inputs = GemmInputs::f32;
  bool a_col = false;  // A stored column-major (leading dimension M)
  bool b_col = false;  // B stored column-major (leading dimension K)
  std::string layouts() const { return std::string(a_col ? "c" : "r") + (b_col ? "c" : "r"); }
  std::string label() const;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
  }
};

class GemmPeer {
 public:
  virtual ~GemmPeer() = default;
  virtual std::string name() const = 0;
  // Empty when usable; otherwise why not (library missing, no kernel for the shape, ...).
  virtual std::string unavailable(const GemmShape& shape, int threads) const = 0;
  // Everything that is not the multiplication itself: plans, primitives, JIT compiles, thread settings.
  // a and b hold f32, bf16 (uint16), or u8 and i8, as shape.inputs says.
  virtual void prepare(const GemmShape& shape, int threads, const void* a, const void* b, float* c) = 0;
  // One multiplication on the buffers given to prepare.
  virtual void run() = 0;
  // Anything worth recording about how the peer ran (kernel name, compile time, library version).
  virtual std::string details() const { return {}; }
};

std::unique_ptr<GemmPeer> make_tessera_peer();
std::unique_ptr<GemmPeer> make_onednn_peer();
std::unique_ptr<GemmPeer> make_openblas_peer();
std::unique_ptr<GemmPeer> make_blis_peer();
std::unique_ptr<GemmPeer> make_libxsmm_peer();
std::unique_ptr<GemmPeer> make_eigen_peer();

}  // namespace tessera::bench
