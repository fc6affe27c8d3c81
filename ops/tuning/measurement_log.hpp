// What every tuner does around its timing loop, whatever the operation: looks up the variants already on record (a
// resumed run does not time them again) and records the ones it times, all in one transaction.
#pragma once

#include <string>
#include <vector>

#include "tessera/measurement_store.hpp"

namespace tessera {

// The median of a variant's samples and their spread (median absolute deviation over the median).
struct SampleSummary {
  double median_ns = 0, spread = 0;
  int samples = 0;
};
SampleSummary summarise(const std::vector<double>& samples);

class MeasurementLog {
 public:
  // `store` may be null (nothing looked up or kept). `base` holds what every measurement of this tuning shares (op,
  // problem, family, signature, target, threads, b_cold); the hardware, version and time are filled in here.
  MeasurementLog(MeasurementStore* store, TuningRecord base);
  // The recorded median of the variant `spec_hash`, or a negative value.
  double recorded_ns(const std::string& spec_hash) const;
  // Kept until commit().
  void add(const std::string& spec_hash, const std::string& config_json, const SampleSummary& summary);
  void commit();

 private:
  MeasurementStore* store_;
  TuningRecord base_;
  std::vector<TuningRecord> pending_;
};

}  // namespace tessera
