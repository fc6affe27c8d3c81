// Tuning records in SQLite: one row per measurement (spec hash, problem, config, target and hardware, median and
// spread of the times, tessera's version, when). A versioned schema; many processes may write at once (WAL, busy
// timeout); a measurement already on record is not taken again, so an interrupted tuning run resumes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "generator/core/cpu_target.hpp"

namespace tessera {

struct TuningRecord {
  std::string spec_hash;  // of the kernel spec (signature, config, target)
  std::string family;     // the shape family from the suite ("skinny", "llm", ...)
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  std::string signature;  // JSON
  std::string config;     // JSON
  std::string target;     // "cpu:avx512"
  std::string hardware;   // the CPU model and its caches
  int threads = 1;
  double median_ns = 0;  // median time of one call
  double spread = 0;     // median absolute deviation / median, over the samples
  int samples = 0;
  std::string tessera_version;
  std::string measured_at;  // ISO 8601, UTC
  bool b_cold = false;      // B evicted from the caches before each timed call (TuneOptions::cold_b)
};

class TuningRecords {
 public:
  // Version 2 added b_cold (a B evicted before each call and one left in the caches are different measurements).
  static constexpr int kSchemaVersion = 2;
  // Opens or creates the database; a version-1 database is upgraded in place (its measurements kept B in the
  // caches). Throws InvalidArgument when the file is not a tessera records database (or has another schema
  // version); never modifies such a file.
  explicit TuningRecords(const std::string& path);
  ~TuningRecords();
  TuningRecords(const TuningRecords&) = delete;
  TuningRecords& operator=(const TuningRecords&) = delete;

  // Adds one measurement (ignored if the same spec, sizes, threads and hardware are already recorded).
  void add(const TuningRecord& record);
  // Adds many in one transaction (all or none), each as add() would.
  void add(const std::vector<TuningRecord>& records);
  // The recorded median time (ns) of that measurement, or a negative value when there is none.
  double recorded_ns(const std::string& spec_hash, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                     int threads, const std::string& hardware, bool b_cold = false) const;
  // Every record, optionally of one target only, ordered by problem then spec.
  std::vector<TuningRecord> all(const std::string& target = "") const;
  std::int64_t count() const;

  // The host's description as records store it.
  static std::string host_hardware();
  // `base` with the cache sizes a stored hardware description names: features and default configs of recorded
  // problems are those of the machine that measured them, not of the one reading the records. A description
  // without them leaves `base` as it is.
  static CpuTarget hardware_target(CpuTarget base, const std::string& hardware);

 private:
  struct Db;
  std::unique_ptr<Db> db_;
};

}  // namespace tessera
