#include "bench/cuda_benchmark.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>
#include "bench/agreement.hpp"
#include "bench/peers/cublas_peer.hpp"
#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "tessera/cuda.hpp"

namespace tessera::bench {

namespace {
// Host values of an operand in its storage type, from the same random f32 stream for every dtype.
std::vector<std::uint8_t> random_operand(std::int64_t count, DType dtype, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int elem = dtype_bytes(dtype);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count * elem));
  for (std::int64_t i = 0; i < count; ++i) {
    const float x = dist(rng);
    if (elem == 2) {
      const std::uint16_t h = dtype == DType::f16 ? to_f16(x) : to_bf16(x);
      std::memcpy(bytes.data() + i * 2, &h, 2);
    } else {
      std::memcpy(bytes.data() + i * 4, &x, 4);
    }
  }
  return bytes;
}
}  // namespace

nlohmann::json run_cuda_benchmark(const std::vector<GemmShape>& shapes, const CudaBenchmarkOptions& options,
                                  const std::function<void(const nlohmann::json&)>& on_row) {
  CudaRuntime runtime(options.target);
  const std::shared_ptr<Cublas> cublas = Cublas::load();
  std::mt19937 rng(7);
  nlohmann::json rows = nlohmann::json::array();
  for (const GemmShape& shape : shapes)
    for (const auto& [la, lb] : options.layouts) {
      const std::int64_t m = shape.m, n = shape.n, k = shape.k;
      const int elem = dtype_bytes(options.dtype);
      const std::size_t a_bytes = static_cast<std::size_t>(m * k * elem),
                        b_bytes = static_cast<std::size_t>(k * n * elem);
      const std::size_t d_bytes = static_cast<std::size_t>(m * n * 4);
      // Enough operand sets that consecutive calls never find the previous call's data in L2.
      const std::int64_t set_bytes = static_cast<std::int64_t>(a_bytes + b_bytes + d_bytes);
      const int sets = static_cast<int>(std::clamp<std::int64_t>(2 * runtime.l2_bytes() / set_bytes + 1, 1, 64));
      const auto host_a = random_operand(m * k, options.dtype, rng), host_b = random_operand(k * n, options.dtype, rng);
      std::vector<DeviceBuffer> a, b, d_tessera, d_cublas;
      std::vector<GemmArgs> args;
      for (int s = 0; s < sets; ++s) {
        a.push_back(runtime.allocate(a_bytes));
        b.push_back(runtime.allocate(b_bytes));
        d_tessera.push_back(runtime.allocate(d_bytes));
        d_cublas.push_back(runtime.allocate(d_bytes));
        a.back().copy_from_host(host_a.data(), a_bytes);
        b.back().copy_from_host(host_b.data(), b_bytes);
        GemmArgs g;
        g.a = Tensor::matrix(a.back().data(), m, k, la, 0, options.dtype);
        g.b = Tensor::matrix(b.back().data(), k, n, lb, 0, options.dtype);
        g.d = Tensor::matrix(d_tessera.back().data(), m, n);
        args.push_back(g);
      }
      const CudaGemmKernel kernel = runtime.compile(describe_gemm(args[0]), runtime.default_config(args[0]));
      const auto run_tessera = [&] {
        for (const auto& g : args) kernel.run(g);
      };
      const auto run_cublas = [&] {
        for (int s = 0; s < sets; ++s)
          cublas->gemm(m, n, k, options.dtype, la, lb, a[static_cast<std::size_t>(s)].data(),
                       b[static_cast<std::size_t>(s)].data(),
                       static_cast<float*>(d_cublas[static_cast<std::size_t>(s)].data()));
      };
      run_tessera();  // warm-up: module load, clocks
      run_cublas();
      std::vector<double> t_ms, c_ms;
      for (int r = 0; r < std::max(1, options.repeat); ++r) {
        t_ms.push_back(runtime.time_ms(run_tessera) / sets);
        c_ms.push_back(runtime.time_ms(run_cublas) / sets);
      }
      runtime.synchronize();
      std::vector<float> dt(static_cast<std::size_t>(m * n)), dc(dt.size());
      d_tessera[0].copy_to_host(dt.data(), d_bytes);
      d_cublas[0].copy_to_host(dc.data(), d_bytes);
      const double max_err = max_abs_diff(dt, dc);
      double max_ref = 0;
      for (float x : dc) max_ref = std::max(max_ref, std::fabs(double{x}));
      const double rel = max_ref > 0 ? max_err / max_ref : max_err;
      const double tolerance = options.dtype == DType::tf32 ? 1e-2 : 1e-3;  // both accumulate in f32
      const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
      const double tessera_tflops = flops / (median(t_ms) * 1e9), cublas_tflops = flops / (median(c_ms) * 1e9);
      nlohmann::json row{{"m", m},
                         {"n", n},
                         {"k", k},
                         {"layout", fmt::format("{}{}", la.name()[0], lb.name()[0])},
                         {"dtype", dtype_name(options.dtype)},
                         {"kernel", kernel.name()},
                         {"operand_sets", sets},
                         {"tessera_ms", median(t_ms)},
                         {"cublas_ms", median(c_ms)},
                         {"tessera_tflops", tessera_tflops},
                         {"cublas_tflops", cublas_tflops},
                         {"ratio", tessera_tflops / cublas_tflops},
                         {"max_rel_diff", rel},
                         {"agrees", rel <= tolerance}};
      on_row(row);
      rows.push_back(row);
    }
  return {{"device", runtime.device_name()}, {"target", runtime.target().str()}, {"rows", rows}};
}

}  // namespace tessera::bench
