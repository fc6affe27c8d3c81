#include "tessera/tuning_records.hpp"

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
  int version = 0;
  std::string table = "measurements";  // or a view of an older file's rows as version 3 reads them
  ~Db() {
    if (handle) sqlite3_close(handle);
  }
  void exec(const std::string& sql) const { exec(sql.c_str()); }
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
  Statement(sqlite3* db, const std::string& sql) : Statement(db, sql.c_str()) {}
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
  spec_hash TEXT NOT NULL, op TEXT NOT NULL, problem TEXT NOT NULL, family TEXT NOT NULL,
  signature TEXT NOT NULL, config TEXT NOT NULL, target TEXT NOT NULL, hardware TEXT NOT NULL,
  threads INTEGER NOT NULL, median_ns REAL NOT NULL, spread REAL NOT NULL, samples INTEGER NOT NULL,
  tessera_version TEXT NOT NULL, measured_at TEXT NOT NULL, b_cold INTEGER NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS measurement_key_v3
  ON measurements(spec_hash, op, problem, threads, hardware, b_cold);
)";

// Versions 1 and 2 held GEMM only, its sizes in columns m, n, k and batch; version 1 had no b_cold (all its
// measurements left B in the caches between calls). Their rows as version 3 reads them: the problem as
// record_problem(GemmProblem) writes it (json_object keeps the order given, which is the sorted one).
std::string legacy_rows(int version, const char* table) {
  return fmt::format(
      "SELECT id, spec_hash, 'gemm' AS op, json_object('batch', batch, 'k', k, 'm', m, 'n', n) AS problem, family, "
      "signature, config, target, hardware, threads, median_ns, spread, samples, tessera_version, measured_at, {} AS "
      "b_cold FROM {}",
      version >= 2 ? "b_cold" : "0", table);
}

constexpr const char* kColumns =
    "spec_hash, op, problem, family, signature, config, target, hardware, threads, median_ns, spread, samples, "
    "tessera_version, measured_at, b_cold";
}  // namespace

TuningRecords::TuningRecords(const std::string& path, Access access) : db_(std::make_unique<Db>()) {
  db_->path = path;
  const bool read_only = access == Access::ReadOnly;
  // A file that exists must already be an SQLite database: refuse to touch anything else.
  if (std::ifstream probe(path, std::ios::binary); probe) {
    char header[16] = {};
    probe.read(header, sizeof header);
    if (probe.gcount() > 0 &&
        std::string(header, static_cast<std::size_t>(probe.gcount())).rfind("SQLite format 3", 0) != 0)
      throw InvalidArgument("--records", "'" + path + "' is not an SQLite database");
  } else if (read_only) {
    throw InvalidArgument("--records", "'" + path + "' does not exist or cannot be read");
  }
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &db_->handle, flags, nullptr) != SQLITE_OK)
    throw InvalidArgument("--records", fmt::format("cannot open '{}': {}", path, sqlite3_errmsg(db_->handle)));
  // Found now, not at the first measurement, when the run's work would be lost.
  if (!read_only && sqlite3_db_readonly(db_->handle, "main") == 1)
    throw InvalidArgument("--records", "'" + path + "' is read-only: measurements could not be recorded");
  sqlite3_busy_timeout(db_->handle, 60000);
  try {
    if (!read_only) db_->exec("PRAGMA journal_mode=WAL;");
    db_->exec(read_only ? "BEGIN;" : "BEGIN IMMEDIATE;");
  } catch (const Error& e) {
    throw InvalidArgument("--records", fmt::format("'{}' is not a usable database: {}", path, e.what()));
  }
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
    if (empty && read_only) throw InvalidArgument("--records", "'" + path + "' holds no tessera records");
    if (!empty && !has_meta) throw InvalidArgument("--records", "'" + path + "' is not a tessera records database");
    std::string found;
    if (has_meta) {
      Statement version(db_->handle, "SELECT value FROM tessera_meta WHERE key='schema_version'");
      if (version.step() == SQLITE_ROW) found = version.text(0);
    }
    if (!found.empty() && found != "1" && found != "2" && found != std::to_string(kSchemaVersion))
      throw InvalidArgument("--records", fmt::format("'{}' has schema version {}; this tessera reads versions 1 to {}",
                                                     path, found, kSchemaVersion));
    const int version = found.empty() ? (empty ? kSchemaVersion : 0) : std::stoi(found);
    if (version == 0) throw InvalidArgument("--records", "'" + path + "' has no schema version");
    db_->version = version;
    if (read_only) {
      // An older file is read through a view in the connection's temporary schema: the file stays as it is.
      if (version < kSchemaVersion) {
        db_->exec("CREATE TEMP VIEW records AS " + legacy_rows(version, "main.measurements") + ";");
        db_->table = "temp.records";
      }
    } else {
      if (version < kSchemaVersion && !empty) {
        // Rebuilt as version 3 in this transaction: every measurement kept, with its id.
        db_->exec("ALTER TABLE measurements RENAME TO measurements_old;");
        db_->exec(kSchema);
        db_->exec(fmt::format("INSERT INTO measurements(id, {}) SELECT id, {} FROM ({});", kColumns, kColumns,
                              legacy_rows(version, "measurements_old")));
        db_->exec("DROP TABLE measurements_old;");
      }
      db_->exec(kSchema);
      if (found != std::to_string(kSchemaVersion)) {
        Statement set_version(db_->handle,
                              "INSERT OR REPLACE INTO tessera_meta(key, value) VALUES('schema_version', ?)");
        set_version.bind(1, std::to_string(kSchemaVersion)).step();
      }
      db_->version = kSchemaVersion;
    }
    db_->exec("COMMIT;");
  } catch (...) {
    sqlite3_exec(db_->handle, "ROLLBACK;", nullptr, nullptr, nullptr);
    throw;
  }
}

TuningRecords::~TuningRecords() = default;

void TuningRecords::add(const TuningRecord& r) {
  if (db_->table != "measurements")
    throw InvalidArgument("--records", "'" + db_->path + "' was opened to be read: measurements cannot be added");
  Statement insert(db_->handle, fmt::format("INSERT OR IGNORE INTO measurements({}) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, "
                                            "?, ?, ?, ?, ?, ?)",
                                            kColumns));
  insert.bind(1, r.spec_hash).bind(2, r.op).bind(3, r.problem).bind(4, r.family).bind(5, r.signature);
  insert.bind(6, r.config).bind(7, r.target).bind(8, r.hardware).bind(9, std::int64_t{r.threads});
  insert.bind(10, r.median_ns).bind(11, r.spread).bind(12, std::int64_t{r.samples}).bind(13, r.tessera_version);
  insert.bind(14, r.measured_at).bind(15, std::int64_t{r.b_cold});
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

double TuningRecords::recorded_ns(const TuningRecord& key) const {
  Statement q(db_->handle, fmt::format("SELECT median_ns FROM {} WHERE spec_hash=? AND op=? AND problem=? AND "
                                       "threads=? AND hardware=? AND b_cold=?",
                                       db_->table));
  q.bind(1, key.spec_hash).bind(2, key.op).bind(3, key.problem).bind(4, std::int64_t{key.threads});
  q.bind(5, key.hardware).bind(6, std::int64_t{key.b_cold});
  return q.step() == SQLITE_ROW ? q.real(0) : -1.0;
}

std::vector<TuningRecord> TuningRecords::all(const std::string& op, const std::string& target) const {
  Statement q(db_->handle, fmt::format("SELECT {} FROM {} WHERE (?1 = '' OR op = ?1) AND (?2 = '' OR target = ?2) "
                                       "ORDER BY hardware, threads, b_cold, op, problem, signature, spec_hash",
                                       kColumns, db_->table));
  q.bind(1, op).bind(2, target);
  std::vector<TuningRecord> out;
  while (q.step() == SQLITE_ROW) {
    TuningRecord r;
    r.spec_hash = q.text(0), r.op = q.text(1), r.problem = q.text(2), r.family = q.text(3);
    r.signature = q.text(4), r.config = q.text(5), r.target = q.text(6), r.hardware = q.text(7);
    r.threads = static_cast<int>(q.integer(8));
    r.median_ns = q.real(9), r.spread = q.real(10), r.samples = static_cast<int>(q.integer(11));
    r.tessera_version = q.text(12), r.measured_at = q.text(13);
    r.b_cold = q.integer(14) != 0;
    out.push_back(std::move(r));
  }
  return out;
}

std::int64_t TuningRecords::count() const {
  Statement q(db_->handle, fmt::format("SELECT count(*) FROM {}", db_->table));
  q.step();
  return q.integer(0);
}

int TuningRecords::schema_version() const { return db_->version; }

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
  // The vendor, from the model name the description starts with: the recording machine's, not the evaluating one's
  // (the rules that differ by vendor, e.g. prefetching, must judge a record as its machine ran it).
  if (hardware.find("Intel") != std::string::npos)
    base.intel = true;
  else if (hardware.find("AMD") != std::string::npos)
    base.intel = false;
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
