#include "bench/stream_read.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

namespace tessera::bench {

double stream_read_gbps(int threads) {
  constexpr std::size_t kFloats = std::size_t{256} << 20;  // 1 GiB
  std::unique_ptr<float[]> data(new float[kFloats]);
  std::fill(data.get(), data.get() + kFloats, 1.0f);
  double best = 0;
  std::vector<float> sums(static_cast<std::size_t>(threads));
  for (int pass = 0; pass < 4; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        const std::size_t share = kFloats / static_cast<std::size_t>(threads);
        const float* p = data.get() + share * static_cast<std::size_t>(t);
        float acc[16] = {};  // independent sums the compiler keeps in vector registers
        for (std::size_t i = 0; i < share; i += 16)
          for (std::size_t k = 0; k < 16; ++k) acc[k] += p[i + k];
        float total = 0;
        for (float a : acc) total += a;
        sums[static_cast<std::size_t>(t)] = total;
      });
    for (auto& w : workers) w.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(kFloats) * 4 / seconds / 1e9);
  }
  volatile float sink = sums[0];  // the sums are used
  (void)sink;
  return best;
}

}  // namespace tessera::bench
