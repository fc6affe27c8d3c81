#include "bench/gemm_benchmark.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "bench/agreement.hpp"
#include "bench/sampling.hpp"
#include "generator/core/dtype.hpp"
#include "generator/core/error.hpp"

namespace tessera::bench {

namespace {

std::unique_ptr<GemmPeer> make_peer(const std::string& name) {
  if (name == "tessera") return make_tessera_peer();
  if (name == "onednn") return make_onednn_peer();
  if (name == "openblas") return make_openblas_peer();
  if (name == "blis") return make_blis_peer();
  if (name == "libxsmm") return make_libxsmm_peer();
  if (name == "eigen") return make_eigen_peer();
  throw InvalidArgument("--peers", "unknown peer '" + name + "' (onednn, openblas, blis, libxsmm, eigen)");
}

}  // namespace

std::vector<ShapeResult> run_gemm_benchmark(const std::vector<GemmShape>& shapes, const BenchmarkOptions& options,
                                            const std::function<void(const ShapeResult&)>& on_result) {
  if (options.repeat < 1) throw InvalidArgument("--repeat", "must be >= 1");
  for (int t : options.threads)
    if (t < 1 || t > 256) throw InvalidArgument("--threads", "each thread count must be in 1..256");
  std::vector<std::unique_ptr<GemmPeer>> peers;
  peers.push_back(make_peer("tessera"));
  for (const auto& name : options.peers)
    if (name != "tessera") peers.push_back(make_peer(name));

  Sampling sampling{options.sample_ms, options.settle_ms};
  std::vector<ShapeResult> all;
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<GemmShape> runs;
  for (GemmShape s : shapes)
    for (auto [a_col, b_col] : options.layouts) {
      s.a_col = a_col;
      s.b_col = b_col;
      runs.push_back(s);
    }
  for (GemmShape s : runs) {
    s.inputs = options.inputs;
    std::vector<float> a(static_cast<std::size_t>(s.batch * s.m * s.k)),
        b(static_cast<std::size_t>(s.batch * s.k * s.n));
    for (auto& x : a) x = dist(rng);
    for (auto& x : b) x = dist(rng);
    std::vector<std::uint16_t> a16, b16;
    std::vector<std::uint8_t> a8;
    std::vector<std::int8_t> b8;
    const void* a_data = a.data();
    const void* b_data = b.data();
    std::size_t b_element_bytes = 4;
    if (s.inputs == GemmInputs::bf16) {
      for (float x : a) a16.push_back(to_bf16(x));
      for (float x : b) b16.push_back(to_bf16(x));
      a_data = a16.data(), b_data = b16.data(), b_element_bytes = 2;
    } else if (s.inputs == GemmInputs::int8) {
      // Every value of each type: the i32 sums of both libraries are exact, so their f32 results agree exactly.
      for (float x : a) a8.push_back(static_cast<std::uint8_t>(std::lround((x + 1) * 127.5f)));
      for (float x : b) b8.push_back(static_cast<std::int8_t>(std::lround(x * 127.0f)));
      a_data = a8.data(), b_data = b8.data(), b_element_bytes = 1;
    }
    std::vector<std::vector<float>> c(peers.size(), std::vector<float>(static_cast<std::size_t>(s.batch * s.m * s.n)));
    if (options.cold_b) {  // every library reads the same B, so one eviction serves each of them
      sampling.cold = b_data;
      sampling.cold_bytes = static_cast<std::size_t>(s.batch * s.k * s.n) * b_element_bytes;
    }

    for (int threads : options.threads) {
      // The pause lets the previous run's threads go idle. Within a run on one thread no library has other
      // threads, so its samples follow each other without it: an idle pause before every sample left a
      // memory-bound shape half-warm (1×4096×4096 with B in L3, GFLOP/s: tessera 14.3 -> 9.5, Eigen 14.1 -> 11.4,
      // BLIS 14.1 -> 11.0), and `--cold-b` measures a cold B deliberately.
      sampling.settle();
      const bool settle_each_sample = threads > 1;
      ShapeResult r;
      r.shape = s;
      r.threads = threads;
      for (std::size_t i = 0; i < peers.size(); ++i) {
        PeerResult p;
        p.peer = peers[i]->name();
        p.unavailable = peers[i]->unavailable(s, threads);
        if (p.unavailable.empty()) {
          std::fill(c[i].begin(), c[i].end(), NAN);
          peers[i]->prepare(s, threads, a_data, b_data, c[i].data());
          p.calls_per_sample = sampling.calibrate([&] { peers[i]->run(); });
          p.details = peers[i]->details();
        }
        r.results.push_back(p);
      }
      // Interleave the peers sample by sample so that machine noise falls on all of them alike; an untimed call
      // first lets the previous library's threads go quiet.
      for (int rep = 0; rep < options.repeat; ++rep)
        for (std::size_t i = 0; i < peers.size(); ++i) {
          PeerResult& p = r.results[i];
          if (!p.unavailable.empty()) continue;
          p.gflops.push_back(s.flops() /
                             sampling.sample([&] { peers[i]->run(); }, p.calls_per_sample, settle_each_sample) / 1e9);
        }
      double scale = 0;
      for (float x : c[0]) scale = std::max(scale, static_cast<double>(std::fabs(x)));
      const double tolerance = static_cast<double>(s.k) * std::ldexp(1.0, -23) * std::max(scale, 1.0);
      for (std::size_t i = 0; i < peers.size(); ++i) {
        PeerResult& p = r.results[i];
        if (!p.unavailable.empty()) continue;
        p.median_gflops = median(p.gflops);
        const double diff = max_abs_diff(c[i], c[0]);
        p.max_rel_diff = diff / std::max(scale, 1e-30);
        p.agrees = diff <= tolerance;
        if (i > 0 && p.median_gflops > r.best_peer_gflops) {
          r.best_peer_gflops = p.median_gflops;
          r.best_peer = p.peer;
        }
        if (i == 0) continue;
        const double paired = paired_median_ratio(r.results[0].gflops, p.gflops);
        if (r.paired_peer.empty() || paired < r.paired_ratio) {
          r.paired_ratio = paired;
          r.paired_peer = p.peer;
        }
      }
      r.ratio = r.best_peer_gflops > 0 ? r.results[0].median_gflops / r.best_peer_gflops : 0;
      on_result(r);
      all.push_back(std::move(r));
    }
  }
  return all;
}

}  // namespace tessera::bench
