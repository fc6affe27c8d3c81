// Tuning records in SQLite (the tessera_tuning library): one row per measurement (op, problem, spec hash, config,
// target and hardware, median and spread of the times, tessera's version, when). A versioned schema; many processes
// may write at once (WAL, busy timeout); a measurement already on record is not taken again, so an interrupted
// tuning run resumes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "generator/core/cpu_target.hpp"
#include "tessera/measurement_store.hpp"

namespace tessera {

class TuningRecords : public MeasurementStore {
 public:
  // 2 added b_cold (a B evicted before each call and one left in the caches are different measurements); 3 keys
  // measurements by op and problem (JSON) instead of GEMM's m, n, k and batch columns.
  static constexpr int kSchemaVersion = 3;
  enum class Access { ReadWrite, ReadOnly };
  // ReadWrite opens or creates the database and upgrades an older one in place, every measurement kept (version 1's
  // left B in the caches; versions 1 and 2 hold GEMM only). ReadOnly reads any version as it is and never writes:
  // training and evaluating from committed or read-only records change nothing. Throws InvalidArgument when the
  // file is not a tessera records database (or has a newer schema), and never modifies such a file.
  explicit TuningRecords(const std::string& path, Access access = Access::ReadWrite);
  ~TuningRecords() override;
  TuningRecords(const TuningRecords&) = delete;
  TuningRecords& operator=(const TuningRecords&) = delete;

  // Adds one measurement (ignored if the same measurement is already recorded).
  void add(const TuningRecord& record);
  void add(const std::vector<TuningRecord>& records) override;
  double recorded_ns(const TuningRecord& key) const override;
  // Every record, optionally of one op and one target only, ordered by hardware, threads, problem, then spec.
  std::vector<TuningRecord> all(const std::string& op = "", const std::string& target = "") const;
  std::int64_t count() const;
  // The schema version of the file as it is (a ReadOnly view of an old file keeps its version).
  int schema_version() const;

  // `base` with the cache sizes a stored hardware description names: features and default configs of recorded
  // problems are those of the machine that measured them, not of the one reading the records. A description
  // without them leaves `base` as it is.
  static CpuTarget hardware_target(CpuTarget base, const std::string& hardware);

 private:
  struct Db;
  std::unique_ptr<Db> db_;
};

// Several tuning runs of the same problems merged into one set of records: each measurement becomes the median over
// the runs that took it. A single run's medians are over interleaved rounds a few seconds apart, so a slow spell of
// the host's memory (another tenant streaming through the shared L3 or DRAM) that lasts the whole run of one shape
// reorders its memory-bound variants; runs taken at different times outvote such a spell.
//
// One record per measurement key (spec, op, problem, threads, hardware, B cold or not) found in any run: the median
// of the runs' medians (the mean of the middle two for an even count), the samples summed, the spread the larger of
// the runs' median spread and the spread between the runs' medians (median absolute deviation over the median), the
// latest time. Throws InvalidArgument when one key was measured by different tessera versions (their kernels may
// differ).
std::vector<TuningRecord> merge_tuning_runs(const std::vector<std::vector<TuningRecord>>& runs);

}  // namespace tessera
