#include "tessera/tuning_records.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"

namespace tessera {

std::vector<TuningRecord> merge_tuning_runs(const std::vector<std::vector<TuningRecord>>& runs) {
  using Key = std::tuple<std::string, std::string, std::string, int, std::string, bool>;
  std::map<Key, std::vector<const TuningRecord*>> by_key;
  std::vector<Key> order;  // first appearance, so the output follows the runs' order
  for (const auto& run : runs)
    for (const TuningRecord& r : run) {
      const Key key{r.spec_hash, r.op, r.problem, r.threads, r.hardware, r.b_cold};
      auto& list = by_key[key];
      if (list.empty()) order.push_back(key);
      if (!list.empty() && r.tessera_version != list.front()->tessera_version)
        throw InvalidArgument(
            "runs", fmt::format("{} {} ({}) was measured by tessera {} in one run and {} in "
                                "another: runs of different versions do not merge",
                                r.op, r.problem, r.spec_hash, list.front()->tessera_version, r.tessera_version));
      list.push_back(&r);
    }
  std::vector<TuningRecord> merged;
  merged.reserve(order.size());
  for (const Key& key : order) {
    const auto& list = by_key[key];
    TuningRecord out = *list.front();
    std::vector<double> medians, spreads;
    out.samples = 0;
    for (const TuningRecord* r : list) {
      medians.push_back(r->median_ns);
      spreads.push_back(r->spread);
      out.samples += r->samples;
      out.measured_at = std::max(out.measured_at, r->measured_at);
    }
    out.median_ns = midpoint_median(medians);
    std::vector<double> deviations;
    for (double x : medians) deviations.push_back(std::fabs(x - out.median_ns));
    out.spread =
        std::max(midpoint_median(spreads), out.median_ns > 0 ? midpoint_median(deviations) / out.median_ns : 0.0);
    merged.push_back(std::move(out));
  }
  return merged;
}

}  // namespace tessera
