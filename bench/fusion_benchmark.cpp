#include "bench/fusion_benchmark.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <cmath>
#include <dnnl.hpp>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>
#include "bench/agreement.hpp"
#include "tessera/tessera.hpp"

namespace tessera::bench {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct Variant {
  Variant(std::string n, std::function<void()> c) : name(std::move(n)), call(std::move(c)) {}
  std::string name;
  std::function<void()> call;
  int calls = 0;
  std::vector<double> ms;
};

}  // namespace

nlohmann::json run_fusion_benchmark(const std::vector<GemmShape>& shapes, const std::vector<int>& thread_counts,
                                    int repeat, const Sampling& sampling, std::ostream& log) {
  nlohmann::json rows = nlohmann::json::array();
  Runtime runtime;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  log << fmt::format("{:<18} {:>3} {:>10} {:>13} {:>10} {:>12} {:>12} {:>12} {:>15} {:>12}\n", "shape", "thr",
                     "tessera", "tessera+gelu", "onednn", "onednn+gelu", "onednn,gelu", "fused/plain", "unfused/fused",
                     "onednn/ours");
  for (const GemmShape& s : shapes) {
    if (s.batch != 1) continue;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<float> a(static_cast<std::size_t>(s.m * s.k)), b(static_cast<std::size_t>(s.k * s.n)),
        bias(static_cast<std::size_t>(s.n));
    for (auto* v : {&a, &b, &bias})
      for (auto& x : *v) x = dist(rng);
    std::vector<float> d_plain(static_cast<std::size_t>(s.m * s.n)), d_fused(d_plain.size()),
        d_onednn_fused(d_plain.size()), d_onednn_split(d_plain.size());

    for (int threads : thread_counts) {
      GemmArgs plain;
      plain.a = Tensor::matrix(a.data(), s.m, s.k);
      plain.b = Tensor::matrix(b.data(), s.k, s.n);
      plain.d = Tensor::matrix(d_plain.data(), s.m, s.n);
      plain.threads = threads;
      GemmArgs fused = plain;
      fused.d = Tensor::matrix(d_fused.data(), s.m, s.n);
      fused.set_epilogue("gelu(acc + bias[n])");
      fused.inputs["bias"] = Tensor::vector(bias.data(), s.n);
      const GemmKernel plain_kernel = runtime.compile(runtime.describe(plain));
      const GemmKernel fused_kernel = runtime.compile(runtime.describe(fused));

      omp_set_num_threads(threads);  // oneDNN sizes a primitive for the threads there are when it is created
      const dnnl::memory::desc ad({s.m, s.k}, dt::f32, tag::ab), bd({s.k, s.n}, dt::f32, tag::ab),
          biasd({1, s.n}, dt::f32, tag::ab), cd({s.m, s.n}, dt::f32, tag::ab);
      dnnl::post_ops gelu_post;
      gelu_post.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
      dnnl::primitive_attr gelu_attr;
      gelu_attr.set_post_ops(gelu_post);
      const dnnl::matmul::desc with_bias(ad, bd, biasd, cd);
      dnnl::matmul onednn_fused(dnnl::matmul::primitive_desc(with_bias, gelu_attr, engine));
      dnnl::matmul onednn_matmul(dnnl::matmul::primitive_desc(with_bias, engine));
      dnnl::eltwise_forward onednn_gelu(dnnl::eltwise_forward::primitive_desc(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_gelu_erf, cd, 0.f),
          engine));
      auto mem = [&](const dnnl::memory::desc& d, std::vector<float>& v) { return dnnl::memory(d, engine, v.data()); };
      dnnl::memory am = mem(ad, a), bm = mem(bd, b), biasm = mem(biasd, bias), fused_out = mem(cd, d_onednn_fused),
                   split_out = mem(cd, d_onednn_split);
      const auto onednn = [&](dnnl::primitive& p, std::unordered_map<int, dnnl::memory> args) {
        omp_set_num_threads(threads);
        p.execute(stream, args);
        stream.wait();
      };

      std::vector<Variant> variants{
          {"tessera", [&] { plain_kernel.run(plain); }},
          {"tessera+gelu", [&] { fused_kernel.run(fused); }},
          {"onednn+gelu",
           [&] {
             onednn(onednn_fused,
                    {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, fused_out}});
           }},
          {"onednn",
           [&] {
             onednn(onednn_matmul,
                    {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, split_out}});
           }},
          {"onednn,gelu",
           [&] {
             onednn(onednn_matmul,
                    {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, split_out}});
             onednn(onednn_gelu, {{DNNL_ARG_SRC, split_out}, {DNNL_ARG_DST, split_out}});
           }},
      };
      for (auto& v : variants) v.calls = sampling.calibrate(v.call);
      for (int r = 0; r < repeat; ++r)
        for (auto& v : variants) v.ms.push_back(1e3 * sampling.sample(v.call, v.calls));

      // The fused results must agree with oneDNN's.
      const double diff = max_rel_diff(d_fused, d_onednn_split);
      nlohmann::json row{{"shape", s.label()}, {"threads", threads}, {"max_rel_diff_fused_vs_onednn", diff}};
      for (auto& v : variants) row[v.name + "_ms"] = median(v.ms);
      const double fused_over_plain = row["tessera+gelu_ms"].get<double>() / row["tessera_ms"].get<double>();
      const double best_other = std::min(row["onednn+gelu_ms"].get<double>(), row["onednn,gelu_ms"].get<double>());
      row["fused_over_plain"] = fused_over_plain;
      row["best_onednn_over_tessera_fused"] = best_other / row["tessera+gelu_ms"].get<double>();
      // The separate elementwise pass, timed as oneDNN's split minus its matmul, after tessera's plain GEMM.
      const double pass_ms = std::max(0.0, row["onednn,gelu_ms"].get<double>() - row["onednn_ms"].get<double>());
      row["separate_pass_ms"] = pass_ms;
      row["tessera_then_pass_over_fused"] =
          (row["tessera_ms"].get<double>() + pass_ms) / row["tessera+gelu_ms"].get<double>();
      log << fmt::format(
          "{:<18} {:>3} {:>10.3f} {:>13.3f} {:>10.3f} {:>12.3f} {:>12.3f} {:>12.3f} {:>15.3f} {:>12.2f}\n", s.label(),
          threads, row["tessera_ms"].get<double>(), row["tessera+gelu_ms"].get<double>(),
          row["onednn_ms"].get<double>(), row["onednn+gelu_ms"].get<double>(), row["onednn,gelu_ms"].get<double>(),
          fused_over_plain, row["tessera_then_pass_over_fused"].get<double>(),
          row["best_onednn_over_tessera_fused"].get<double>());
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace tessera::bench
