#include "ops/tuning/measurement_log.hpp"

#include <cmath>
#include <ctime>

#include "generator/core/arith.hpp"
#include "generator/core/cpu_target.hpp"

namespace tessera {

namespace {
std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}
}  // namespace

SampleSummary summarise(const std::vector<double>& samples) {
  SampleSummary s;
  s.samples = static_cast<int>(samples.size());
  s.median_ns = median(samples);
  std::vector<double> deviations;
  for (double x : samples) deviations.push_back(std::fabs(x - s.median_ns));
  s.spread = s.median_ns > 0 ? median(std::move(deviations)) / s.median_ns : 0.0;
  return s;
}

MeasurementLog::MeasurementLog(MeasurementStore* store, TuningRecord base) : store_(store), base_(std::move(base)) {
  base_.hardware = host_hardware();
  base_.tessera_version = TESSERA_VERSION;
}

double MeasurementLog::recorded_ns(const std::string& spec_hash) const {
  if (!store_) return -1.0;
  TuningRecord key = base_;
  key.spec_hash = spec_hash;
  return store_->recorded_ns(key);
}

void MeasurementLog::add(const std::string& spec_hash, const std::string& config_json, const SampleSummary& summary) {
  if (!store_) return;
  TuningRecord r = base_;
  r.spec_hash = spec_hash;
  r.config = config_json;
  r.median_ns = summary.median_ns;
  r.spread = summary.spread;
  r.samples = summary.samples;
  r.measured_at = utc_now();
  pending_.push_back(std::move(r));
}

void MeasurementLog::commit() {
  if (store_ && !pending_.empty()) store_->add(pending_);
  pending_.clear();
}

}  // namespace tessera
