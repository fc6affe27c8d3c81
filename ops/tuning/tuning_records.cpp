#include "ops/tuning/tuning_records.hpp"

#include <sqlite3.h>
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <regex>
#include <thread>

#include "generator/core/error.hpp"

namespace tessera {

struct TuningRecords::Db {
  sqlite3* handle = nullptr;
  std::string path;
  ~Db() {
    if (handle) sqlite3_close(handle);
  }
  void exec(const char* sql) const {
    char* error = nullptr;
    if (sqlite3_exec(handle, sql, nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string what = error ? error : "unknown error";
      sqlite3_free(error);
      throw Error(fmt::format("records {}: {}", path, what));
    }
  }
};

namespace {
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      throw Error(std::string("records: ") + sqlite3_errmsg(db));
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE; anything else throws.
  int step() {
    const int rc = sqlite3_step(stmt_);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) throw Error(std::string("records: ") + sqlite3_errmsg(db_));
    return rc;
  }
  std::string text(int i) const {
    const auto* t = sqlite3_column_text(stmt_, i);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  std::int64_t integer(int i) const { return sqlite3_column_int64(stmt_, i); }
  double real(int i) const { return sqlite3_column_double(stmt_, i); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS tessera_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS measurements(
  id INTEGER PRIMARY KEY,
  spec_hash TEXT NOT NULL, family TEXT NOT NULL,
  m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL, batch INTEGER NOT NULL,
  signature TEXT NOT NULL, config TEXT NOT NULL, target TEXT NOT NULL, hardware TEXT NOT NULL,
  threads INTEGER NOT NULL, median_ns REAL NOT NULL, spread REAL NOT NULL, samples INTEGER NOT NULL,
  tessera_version TEXT NOT NULL, measured_at TEXT NOT NULL, b_cold INTEGER NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX IF NOT EXISTS measurement_key_v2
  ON measurements(spec_hash, m, n, k, batch, threads, hardware, b_cold);
)";
// Version 1 had no b_cold: all its measurements left B in the caches between calls.
constexpr const char* kMigrateFrom1 = R"(
ALTER TABLE measurements ADD COLUMN b_cold INTEGER NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS measurement_key;
)";
}  // namespace

TuningRecords::TuningRecords(const std::string& path) : db_(std::make_unique<Db>()) {
  db_->path = path;
  // A file that exists must already be an SQLite database: refuse to touch anything else.
  if (std::ifstream probe(path, std::ios::binary); probe) {
    char header[16] = {};
    probe.read(header, sizeof header);
    if (probe.gcount() > 0 &&
        std::string(header, static_cast<std::size_t>(probe.gcount())).rfind("SQLite format 3", 0) != 0)
      throw InvalidArgument("--records", "'" + path + "' is not an SQLite database");
  }
  if (sqlite3_open_v2(path.c_str(), &db_->handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    throw InvalidArgument("--records", fmt::format("cannot open '{}': {}", path, sqlite3_errmsg(db_->handle)));
  // Found now, not at the first measurement, when the run's work would be lost.
  if (sqlite3_db_readonly(db_->handle, "main") == 1)
    throw InvalidArgument("--records", "'" + path + "' is read-only: measurements could not be recorded");
  sqlite3_busy_timeout(db_->handle, 60000);
  try {
    db_->exec("PRAGMA journal_mode=WAL;");
  } catch (const Error& e) {
    throw InvalidArgument("--records", fmt::format("'{}' is not a usable database: {}", path, e.what()));
  }
  db_->exec("BEGIN IMMEDIATE;");
  try {
    // Each query finalised before the schema changes (a pending one locks the tables against DROP INDEX).
    bool empty = false;
    {
      Statement tables(db_->handle,
                       "SELECT count(*) FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'");
      tables.step();
      empty = tables.integer(0) == 0;
    }
    bool has_meta = false;
    {
      Statement meta(db_->handle, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='tessera_meta'");
      meta.step();
      has_meta = meta.integer(0) == 1;
    }
    if (!empty && !has_meta) throw InvalidArgument("--records", "'" + path + "' is not a tessera records database");
    std::string found;
    if (has_meta) {
      Statement version(db_->handle, "SELECT value FROM tessera_meta WHERE key='schema_version'");
      if (version.step() == SQLITE_ROW) found = version.text(0);
    }
    if (found == "1") {
      db_->exec(kMigrateFrom1);
    } else if (!found.empty() && found != std::to_string(kSchemaVersion)) {
      throw InvalidArgument("--records", fmt::format("'{}' has schema version {}; this tessera reads versions 1 and {}",
                                                     path, found, kSchemaVersion));
    }
    db_->exec(kSchema);
    Statement set_version(db_->handle, "INSERT OR REPLACE INTO tessera_meta(key, value) VALUES('schema_version', ?)");
    if (found != std::to_string(kSchemaVersion)) set_version.bind(1, std::to_string(kSchemaVersion)).step();
    db_->exec("COMMIT;");
  } catch (...) {
    sqlite3_exec(db_->handle, "ROLLBACK;", nullptr, nullptr, nullptr);
    throw;
  }
}

TuningRecords::~TuningRecords() = default;

void TuningRecords::add(const TuningRecord& r) {
  Statement insert(db_->handle,
                   "INSERT OR IGNORE INTO measurements(spec_hash, family, m, n, k, batch, signature, config, target, "
                   "hardware, threads, median_ns, spread, samples, tessera_version, measured_at, b_cold) "
                   "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  insert.bind(1, r.spec_hash).bind(2, r.family).bind(3, r.m).bind(4, r.n).bind(5, r.k).bind(6, r.batch);
  insert.bind(7, r.signature).bind(8, r.config).bind(9, r.target).bind(10, r.hardware);
  insert.bind(11, std::int64_t{r.threads}).bind(12, r.median_ns).bind(13, r.spread).bind(14, std::int64_t{r.samples});
  insert.bind(15, r.tessera_version).bind(16, r.measured_at).bind(17, std::int64_t{r.b_cold});
  insert.step();
}

void TuningRecords::add(const std::vector<TuningRecord>& records) {
  db_->exec("BEGIN IMMEDIATE;");
  try {
    for (const TuningRecord& r : records) add(r);
    db_->exec("COMMIT;");
  } catch (...) {
    sqlite3_exec(db_->handle, "ROLLBACK;", nullptr, nullptr, nullptr);
    throw;
  }
}

double TuningRecords::recorded_ns(const std::string& spec_hash, std::int64_t m, std::int64_t n, std::int64_t k,
                                  std::int64_t batch, int threads, const std::string& hardware, bool b_cold) const {
  Statement q(db_->handle,
              "SELECT median_ns FROM measurements WHERE spec_hash=? AND m=? AND n=? AND k=? AND batch=? AND threads=? "
              "AND hardware=? AND b_cold=?");
  q.bind(1, spec_hash).bind(2, m).bind(3, n).bind(4, k).bind(5, batch).bind(6, std::int64_t{threads}).bind(7, hardware);
  q.bind(8, std::int64_t{b_cold});
  return q.step() == SQLITE_ROW ? q.real(0) : -1.0;
}

std::vector<TuningRecord> TuningRecords::all(const std::string& target) const {
  Statement q(db_->handle,
              "SELECT spec_hash, family, m, n, k, batch, signature, config, target, hardware, threads, median_ns, "
              "spread, samples, tessera_version, measured_at, b_cold FROM measurements WHERE (?1 = '' OR target = ?1) "
              "ORDER BY hardware, threads, b_cold, m, n, k, batch, signature, spec_hash");
  q.bind(1, target);
  std::vector<TuningRecord> out;
  while (q.step() == SQLITE_ROW) {
    TuningRecord r;
    r.spec_hash = q.text(0), r.family = q.text(1);
    r.m = q.integer(2), r.n = q.integer(3), r.k = q.integer(4), r.batch = q.integer(5);
    r.signature = q.text(6), r.config = q.text(7), r.target = q.text(8), r.hardware = q.text(9);
    r.threads = static_cast<int>(q.integer(10));
    r.median_ns = q.real(11), r.spread = q.real(12), r.samples = static_cast<int>(q.integer(13));
    r.tessera_version = q.text(14), r.measured_at = q.text(15);
    r.b_cold = q.integer(16) != 0;
    out.push_back(std::move(r));
  }
  return out;
}

std::int64_t TuningRecords::count() const {
  Statement q(db_->handle, "SELECT count(*) FROM measurements");
  q.step();
  return q.integer(0);
}

std::string TuningRecords::host_hardware() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU", family;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0 && model == "unknown CPU") model = line.substr(line.find(':') + 2);
    if (line.rfind("cpu family", 0) == 0 && family.empty()) family = line.substr(line.find(':') + 2);
  }
  const CpuTarget host = CpuTarget::host();
  std::string text = fmt::format("{} (family {}); L1d {} KiB, L2 {} KiB, L3 {} KiB", model, family,
                                 host.l1d_bytes >> 10, host.l2_bytes >> 10, host.l3_bytes >> 10);
  if (host.isa == CpuIsa::Avx512) text += fmt::format(", AVX-512 FMAs {}/cycle", host.vector_fmas_per_cycle);
  return text;
}

CpuTarget TuningRecords::hardware_target(CpuTarget base, const std::string& hardware) {
  // Descriptions from before the L3 was described (2026-11-25) came from AMD EPYC hosts, with 32 MiB of L3 per core
  // complex (ANCHORS.md). Not the evaluating host's: its L3 (260 MiB on one Xeon) would make an evaluation of the same
  // records depend on where it runs.
  constexpr std::int64_t kUndescribedL3 = 32 << 20;
  static const std::regex caches(R"(L1d (\d{1,9}) KiB, L2 (\d{1,9}) KiB(?:, L3 (\d{1,9}) KiB)?)");
  std::smatch match;
  if (std::regex_search(hardware, match, caches) && std::stoll(match[1]) > 0 && std::stoll(match[2]) > 0) {
    base.l1d_bytes = std::stoll(match[1]) << 10;
    base.l2_bytes = std::stoll(match[2]) << 10;
    base.l3_bytes = match[3].matched && std::stoll(match[3]) > 0 ? std::stoll(match[3]) << 10 : kUndescribedL3;
  }
  if (base.isa == CpuIsa::Avx512) {
    // Descriptions from before the FMA rate was recorded (2026-11-25 evening) came from AMD hosts: a Zen 4
    // (family 25) splits 512-bit FMAs in halves, a Zen 5 (family 26) does not.
    static const std::regex fmas(R"(AVX-512 FMAs ([12])/cycle)");
    if (std::regex_search(hardware, match, fmas))
      base.vector_fmas_per_cycle = std::stoi(match[1]);
    else if (hardware.find("(family ") != std::string::npos)
      base.vector_fmas_per_cycle = hardware.find("(family 25)") != std::string::npos ? 1 : 2;
  }
  return base;
}

}  // namespace tessera
