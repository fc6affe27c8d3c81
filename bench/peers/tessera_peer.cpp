// tessera as a benchmark participant: one runtime, kernels compiled in prepare (compile time reported apart).
#include <fmt/format.h>

#include "bench/gemm_peer.hpp"
#include "tessera/tessera.hpp"

namespace tessera::bench {

namespace {

class TesseraPeer final : public GemmPeer {
 public:
  std::string name() const override { return "tessera"; }
  std::string unavailable(const GemmShape&, int) const override { return {}; }

  void prepare(const GemmShape& s, int threads, const void* a, const void* b, float* c) override {
    args_ = GemmArgs{};
    auto* pa = const_cast<void*>(a);
    auto* pb = const_cast<void*>(b);
    const bool int8 = s.inputs == GemmInputs::int8;
    const DType a_type = int8 ? DType::u8 : s.inputs == GemmInputs::bf16 ? DType::bf16 : DType::f32;
    const DType b_type = int8 ? DType::i8 : a_type;
    const Layout la = s.a_col ? Layout::col_major() : Layout::row_major(),
                 lb = s.b_col ? Layout::col_major() : Layout::row_major();
    if (s.batch == 1) {
      args_.a = Tensor::matrix(pa, s.m, s.k, la, 0, a_type);
      args_.b = Tensor::matrix(pb, s.k, s.n, lb, 0, b_type);
      args_.d = Tensor::matrix(c, s.m, s.n);
    } else {
      args_.a = Tensor::batched(pa, s.batch, s.m, s.k, la, 0, 0, a_type);
      args_.b = Tensor::batched(pb, s.batch, s.k, s.n, lb, 0, 0, b_type);
      args_.d = Tensor::batched(c, s.batch, s.m, s.n);
    }
    args_.threads = threads;
    kernel_ = std::make_unique<GemmKernel>(runtime_.compile(runtime_.describe(args_)));
    // Validated once, like a LIBXSMM kernel dispatched once; each run() is the multiplication only.
    prepared_ = std::make_unique<PreparedGemm>(kernel_->prepare(args_));
  }

  void run() override { prepared_->run(); }

  std::string details() const override {
    return kernel_ ? fmt::format("{} (compiled in {:.1f} ms)", kernel_->name(), kernel_->compile_ms()) : "";
  }

 private:
  Runtime runtime_;
  GemmArgs args_;
  std::unique_ptr<GemmKernel> kernel_;
  std::unique_ptr<PreparedGemm> prepared_;
};

}  // namespace

std::unique_ptr<GemmPeer> make_tessera_peer() { return std::make_unique<TesseraPeer>(); }

}  // namespace tessera::bench
