// Runs tessera and its peers side by side on the same buffers: warm-up, calibrated samples interleaved across
// peers, medians, and each peer's result checked against tessera's.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/gemm_peer.hpp"

namespace tessera::bench {

struct PeerResult {
  std::string peer;
  std::string unavailable;  // non-empty: not measured, and why
  std::string details;
  std::vector<double> gflops;  // one per sample
  double median_gflops = 0;
  double max_rel_diff = 0;  // max |C_peer - C_tessera| / max |C_tessera|
  bool agrees = true;
  int calls_per_sample = 0;
};

struct ShapeResult {
  GemmShape shape;
  int threads = 1;
  std::vector<PeerResult> results;  // tessera first
  std::string best_peer;            // the fastest that is not tessera
  double best_peer_gflops = 0;
  double ratio = 0;  // tessera / best peer (0 without a peer)
  // The lowest over peers of the median over rounds of tessera / that peer (paired_median_ratio; 0 without a peer)
  double paired_ratio = 0;
  std::string paired_peer;  // the peer it is taken against
};

struct BenchmarkOptions {
  std::vector<std::string> peers;
  std::vector<int> threads{1};
  GemmInputs inputs = GemmInputs::f32;
  std::vector<std::pair<bool, bool>> layouts{{false, false}};  // per shape: (A column-major, B column-major)
  int repeat = 5;
  double sample_ms = 20;   // each sample repeats the call until about this long
  double settle_ms = 100;  // pause before each sample (see Sampling)
  bool cold_b = false;     // evict B from the caches before each timed call (each call then timed alone)
};

std::vector<ShapeResult> run_gemm_benchmark(const std::vector<GemmShape>& shapes, const BenchmarkOptions& options,
                                            const std::function<void(const ShapeResult&)>& on_result);

}  // namespace tessera::bench
