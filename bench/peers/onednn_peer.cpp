// oneDNN's matmul primitive (the strongest f32 GEMM among the CPU peers); threads through its OpenMP runtime.
#include <omp.h>

#include <dnnl.hpp>

#include "bench/gemm_peer.hpp"

namespace tessera::bench {

namespace {

class OneDnnPeer final : public GemmPeer {
 public:
  std::string name() const override { return "onednn"; }
  std::string unavailable(const GemmShape&, int) const override { return {}; }

  void prepare(const GemmShape& s, int threads, const void* a, const void* b, float* c) override {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    omp_set_num_threads(threads);
    const bool batched = s.batch > 1;
    const auto dims = [&](std::int64_t r, std::int64_t cols) {
      return batched ? dnnl::memory::dims{s.batch, r, cols} : dnnl::memory::dims{r, cols};
    };
    const tag layout = batched ? tag::abc : tag::ab, transposed = batched ? tag::acb : tag::ba;
    const bool int8 = s.inputs == GemmInputs::int8;
    const dt a_type = int8 ? dt::u8 : s.inputs == GemmInputs::bf16 ? dt::bf16 : dt::f32;
    const dt b_type = int8 ? dt::s8 : a_type;
    const dnnl::memory::desc ad(dims(s.m, s.k), a_type, s.a_col ? transposed : layout),
        bd(dims(s.k, s.n), b_type, s.b_col ? transposed : layout), cd(dims(s.m, s.n), dt::f32, layout);
    primitive_ = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, cd), engine_));
    args_ = {{DNNL_ARG_SRC, dnnl::memory(ad, engine_, const_cast<void*>(a))},
             {DNNL_ARG_WEIGHTS, dnnl::memory(bd, engine_, const_cast<void*>(b))},
             {DNNL_ARG_DST, dnnl::memory(cd, engine_, c)}};
    threads_ = threads;
  }

  void run() override {
    omp_set_num_threads(threads_);
    primitive_.execute(stream_, args_);
    stream_.wait();
  }

  std::string details() const override {
    const dnnl_version_t* v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  }

 private:
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  dnnl::matmul primitive_;
  std::unordered_map<int, dnnl::memory> args_;
  int threads_ = 1;
};

}  // namespace

std::unique_ptr<GemmPeer> make_onednn_peer() { return std::make_unique<OneDnnPeer>(); }

}  // namespace tessera::bench
