// Tuning records: round trip, resume, concurrent writers, and files that are not (this version of) a records DB.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "generator/core/error.hpp"
#include "tessera/tuning_records.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path =
      fs::temp_directory_path() /
      fmt::format("tessera-records-{}-{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string gemm(std::int64_t m, std::int64_t n = 64, std::int64_t k = 64, std::int64_t batch = 1) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k, p.batch = batch;
  return record_problem(p);
}

TuningRecord record(const std::string& hash, std::int64_t m, double ns) {
  return {hash,        "gemm", gemm(m), "square", "{}", "{}",    "cpu:avx512",
          "test host", 1,      ns,      0.01,     5,    "0.1.0", "2026-11-22T00:00:00Z"};
}

// The key of a measurement, as a tuner asks for it.
TuningRecord key(const std::string& hash, std::int64_t m, int threads = 1, bool b_cold = false) {
  TuningRecord r = record(hash, m, 0);
  r.threads = threads;
  r.b_cold = b_cold;
  return r;
}

// An SQLite file made by hand (older schemas), through the C API.
void run_sql(const fs::path& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

std::string schema_version_in(const fs::path& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db, "SELECT value FROM tessera_meta WHERE key='schema_version'", -1, &q, nullptr);
  std::string out = sqlite3_step(q) == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(q, 0)) : "";
  sqlite3_finalize(q);
  sqlite3_close(db);
  return out;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(TuningRecords, StoresResumesAndIgnoresDuplicates) {
  TempDir dir;
  const std::string path = (dir.path / "r.sqlite").string();
  {
    TuningRecords db(path);
    db.add(record("aa", 64, 100.0));
    db.add(record("bb", 64, 90.0));
    db.add(record("aa", 64, 55.0));  // the same measurement again: ignored
    EXPECT_EQ(db.count(), 2);
  }
  TuningRecords reopened(path);
  EXPECT_EQ(reopened.count(), 2);
  EXPECT_EQ(reopened.recorded_ns(key("aa", 64)), 100.0);
  EXPECT_LT(reopened.recorded_ns(key("aa", 65)), 0);
  EXPECT_LT(reopened.recorded_ns(key("aa", 64, 2)), 0) << "another thread count";
  TuningRecord other_op = key("aa", 64);
  other_op.op = "spmm";
  EXPECT_LT(reopened.recorded_ns(other_op), 0) << "another op";
  const auto all = reopened.all("gemm", "cpu:avx512");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].family, "square");
  EXPECT_EQ(all[0].problem, R"({"batch":1,"k":64,"m":64,"n":64})");
  EXPECT_TRUE(reopened.all("", "cpu:avx2").empty());
  EXPECT_TRUE(reopened.all("attention").empty());
}

TEST(TuningRecords, ManyWritersAtOnce) {
  TempDir dir;
  const std::string path = (dir.path / "r.sqlite").string();
  { TuningRecords create(path); }  // the schema first, as a tuning run would
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&, w] {
      TuningRecords db(path);  // each writer its own connection, as separate processes have
      for (int i = 0; i < 100; ++i) db.add(record(fmt::format("w{}", w), i + 1, 1.0 + i));
    });
  for (auto& t : writers) t.join();
  EXPECT_EQ(TuningRecords(path).count(), 400);
}

TEST(TuningRecords, RefusesWhatIsNotARecordsDatabaseAndLeavesItAlone) {
  TempDir dir;
  const fs::path text = dir.path / "notes.txt";
  std::ofstream(text) << "not a database\n";
  EXPECT_THROW(TuningRecords(text.string()), InvalidArgument);
  std::ifstream back(text);
  std::string line;
  std::getline(back, line);
  EXPECT_EQ(line, "not a database");

  // Another application's SQLite database.
  const fs::path other = dir.path / "other.sqlite";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE customers(id INTEGER);", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  EXPECT_THROW(TuningRecords(other.string()), InvalidArgument);

  // A records database of a newer schema.
  const fs::path newer = dir.path / "newer.sqlite";
  TuningRecords(newer.string());
  ASSERT_EQ(sqlite3_open(newer.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "UPDATE tessera_meta SET value='99' WHERE key='schema_version';", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  try {
    TuningRecords again(newer.string());
    ADD_FAILURE() << "opened a schema-99 database";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
  }
}

// A measurement with B evicted before each call is another measurement than one with B left in the caches.
TEST(TuningRecords, ColdAndHotBAreSeparateMeasurements) {
  TempDir dir;
  const std::string path = (dir.path / "r.sqlite").string();
  TuningRecords db(path);
  db.add(record("aa", 64, 100.0));
  TuningRecord cold = record("aa", 64, 180.0);
  cold.b_cold = true;
  db.add(cold);
  EXPECT_EQ(db.count(), 2);
  EXPECT_EQ(db.recorded_ns(key("aa", 64)), 100.0);
  EXPECT_EQ(db.recorded_ns(key("aa", 64, 1, true)), 180.0);
  const auto all = db.all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_FALSE(all[0].b_cold);
  EXPECT_TRUE(all[1].b_cold);
}

constexpr const char* kVersion1 = R"(
    CREATE TABLE tessera_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO tessera_meta VALUES('schema_version', '1');
    CREATE TABLE measurements(id INTEGER PRIMARY KEY, spec_hash TEXT NOT NULL, family TEXT NOT NULL,
      m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL, batch INTEGER NOT NULL, signature TEXT NOT NULL,
      config TEXT NOT NULL, target TEXT NOT NULL, hardware TEXT NOT NULL, threads INTEGER NOT NULL,
      median_ns REAL NOT NULL, spread REAL NOT NULL, samples INTEGER NOT NULL, tessera_version TEXT NOT NULL,
      measured_at TEXT NOT NULL);
    CREATE UNIQUE INDEX measurement_key ON measurements(spec_hash, m, n, k, batch, threads, hardware);
    INSERT INTO measurements VALUES(1, 'aa', 'square', 64, 64, 64, 1, '{}', '{}', 'cpu:avx512', 'test host', 1,
      100.0, 0.01, 5, '0.3.0', '2026-11-24T09:00:00Z');
)";

// Version 2 as tessera 0.3 wrote it (the committed bench/records databases): b_cold, GEMM's sizes in columns.
constexpr const char* kVersion2 = R"(
    CREATE TABLE tessera_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO tessera_meta VALUES('schema_version', '2');
    CREATE TABLE measurements(id INTEGER PRIMARY KEY, spec_hash TEXT NOT NULL, family TEXT NOT NULL,
      m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL, batch INTEGER NOT NULL, signature TEXT NOT NULL,
      config TEXT NOT NULL, target TEXT NOT NULL, hardware TEXT NOT NULL, threads INTEGER NOT NULL,
      median_ns REAL NOT NULL, spread REAL NOT NULL, samples INTEGER NOT NULL, tessera_version TEXT NOT NULL,
      measured_at TEXT NOT NULL, b_cold INTEGER NOT NULL DEFAULT 0);
    CREATE UNIQUE INDEX measurement_key_v2 ON measurements(spec_hash, m, n, k, batch, threads, hardware, b_cold);
    INSERT INTO measurements VALUES(1, 'aa', 'square', 64, 64, 64, 1, '{"a":1}', '{"c":1}', 'cpu:avx512', 'test host',
      1, 100.0, 0.01, 5, '0.3.0', '2026-11-24T09:00:00Z', 0);
    INSERT INTO measurements VALUES(2, 'aa', 'square', 64, 64, 64, 1, '{"a":1}', '{"c":1}', 'cpu:avx512', 'test host',
      1, 180.0, 0.02, 7, '0.3.0', '2026-11-24T09:00:01Z', 1);
    INSERT INTO measurements VALUES(3, 'bb', 'skinny', 2, 4096, 1024, 3, '{"a":2}', '{"c":2}', 'cpu:avx2', 'other',
      2, 5e6, 0.03, 9, '0.2.0', '2026-11-23T09:00:00Z', 0);
)";

// Every field of every row, in all()'s order.
std::vector<std::string> rows_of(const TuningRecords& db) {
  std::vector<std::string> out;
  for (const TuningRecord& r : db.all())
    out.push_back(fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", r.spec_hash, r.op, r.problem, r.family,
                              r.signature, r.config, r.target, r.hardware, r.threads, r.median_ns, r.spread, r.samples,
                              r.tessera_version, r.measured_at, r.b_cold));
  return out;
}

// A version-1 database (no b_cold column) opens upgraded, its measurements kept as taken with B in the caches.
TEST(TuningRecords, UpgradesVersionOneInPlace) {
  TempDir dir;
  const fs::path path = dir.path / "v1.sqlite";
  run_sql(path, kVersion1);
  {
    TuningRecords records(path.string());
    EXPECT_EQ(records.count(), 1);
    EXPECT_EQ(records.recorded_ns(key("aa", 64)), 100.0);
    EXPECT_LT(records.recorded_ns(key("aa", 64, 1, true)), 0);
    TuningRecord cold = record("aa", 64, 150.0);
    cold.b_cold = true;
    records.add(cold);  // the old key (without b_cold) would have refused it
    EXPECT_EQ(records.count(), 2);
  }
  EXPECT_EQ(schema_version_in(path), "3");
  EXPECT_EQ(TuningRecords(path.string()).count(), 2) << "reopened as version 3";
}

// Version 2 (GEMM's sizes in columns) is rebuilt keyed by op and problem, every field of every row kept; read, it is
// the same whether upgraded or not.
TEST(TuningRecords, UpgradesVersionTwoKeepingEveryMeasurement) {
  TempDir dir;
  const fs::path path = dir.path / "v2.sqlite";
  run_sql(path, kVersion2);
  std::vector<std::string> before;
  {
    const TuningRecords view(path.string(), TuningRecords::Access::ReadOnly);
    EXPECT_EQ(view.schema_version(), 2);
    before = rows_of(view);
  }
  ASSERT_EQ(before.size(), 3u);
  EXPECT_EQ(before[1],  // ordered by hardware first: "other" (bb), then "test host"
            R"(aa gemm {"batch":1,"k":64,"m":64,"n":64} square {"a":1} {"c":1} cpu:avx512 test host 1 100 0.01 5 )"
            "0.3.0 2026-11-24T09:00:00Z false");
  {
    TuningRecords db(path.string());
    EXPECT_EQ(db.schema_version(), 3);
    EXPECT_EQ(rows_of(db), before);
    EXPECT_EQ(db.recorded_ns(key("aa", 64, 1, true)), 180.0);
    TuningRecord skinny = key("bb", 2, 2);
    skinny.problem = gemm(2, 4096, 1024, 3), skinny.hardware = "other";
    EXPECT_EQ(db.recorded_ns(skinny), 5e6);
    const GemmExtents e = gemm_extents(db.all("", "cpu:avx2").at(0));
    EXPECT_EQ(e.m, 2);
    EXPECT_EQ(e.n, 4096);
    EXPECT_EQ(e.k, 1024);
    EXPECT_EQ(e.batch, 3);
    db.add(record("aa", 64, 55.0));  // already on record: the upgraded key still refuses a second one
    EXPECT_EQ(db.count(), 3);
  }
  EXPECT_EQ(schema_version_in(path), "3");
}

// Read-only access reads any version without writing a byte (committed records stay as they are), refuses to add,
// and opens a file the process may not write.
TEST(TuningRecords, ReadOnlyAccessChangesNothing) {
  TempDir dir;
  const fs::path path = dir.path / "v2.sqlite";
  run_sql(path, kVersion2);
  const std::string bytes = file_bytes(path);
  fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  {
    TuningRecords view(path.string(), TuningRecords::Access::ReadOnly);
    EXPECT_EQ(view.count(), 3);
    EXPECT_EQ(view.recorded_ns(key("aa", 64)), 100.0);
    EXPECT_EQ(view.all("gemm", "cpu:avx512").size(), 2u);
    EXPECT_THROW(view.add(record("cc", 8, 1.0)), InvalidArgument);
  }
  EXPECT_EQ(file_bytes(path), bytes);
  EXPECT_EQ(schema_version_in(path), "2");
  if (::geteuid() != 0) {  // root may write any file
    EXPECT_THROW(TuningRecords(path.string()), InvalidArgument) << "read-write access to a read-only file";
  }
  EXPECT_THROW(TuningRecords((dir.path / "missing.sqlite").string(), TuningRecords::Access::ReadOnly), InvalidArgument);
  EXPECT_FALSE(fs::exists(dir.path / "missing.sqlite"));
}

// Measurements of other operations live beside GEMM's, keyed by their own problems.
TEST(TuningRecords, OtherOperationsAreKeyedByTheirOwnProblems) {
  TempDir dir;
  TuningRecords db((dir.path / "r.sqlite").string());
  AttentionProblem a;
  a.batch = 2, a.heads = 8, a.kv_heads = 2, a.seq_q = 128, a.seq_kv = 256;
  TuningRecord r = record("aa", 64, 10.0);
  r.op = "attention", r.problem = record_problem(a);
  db.add(r);
  db.add(record("aa", 64, 20.0));  // the same spec hash and host: another op, another measurement
  EXPECT_EQ(db.count(), 2);
  EXPECT_EQ(db.recorded_ns(r), 10.0);
  EXPECT_EQ(r.problem, R"({"batch":2,"heads":8,"kv_heads":2,"seq_kv":256,"seq_q":128})");
  a.seq_lens_q = {100, 28}, a.seq_lens_kv = {200, 56};
  EXPECT_NE(record_problem(a), r.problem) << "varlen lengths are part of the problem";
  EXPECT_THROW(gemm_extents(r), InvalidArgument) << "an attention record has no GEMM sizes";
  TuningRecord broken = record("aa", 64, 1.0);
  broken.problem = "{";
  EXPECT_THROW(gemm_extents(broken), InvalidArgument);
  SpmmProblem s;
  s.m = 10, s.n = 20, s.k = 30, s.pattern.nnz = 40;
  EXPECT_EQ(record_problem(s, 0xabcULL), R"({"k":30,"m":10,"n":20,"nnz":40,"pattern":"0000000000000abc"})");
  EXPECT_NE(record_problem(s, 0xabcULL), record_problem(s, 0xabdULL)) << "another pattern";
}

// Recorded problems are featurised with the caches of the machine that measured them, whatever machine reads them.
TEST(TuningRecords, HardwareDescriptionsGiveTheRecordingMachinesCaches) {
  CpuTarget base;
  base.l1d_bytes = 32 << 10, base.l2_bytes = 2 << 20, base.l3_bytes = 8 << 20;
  const CpuTarget zen5 = TuningRecords::hardware_target(base, "AMD EPYC (family 26); L1d 48 KiB, L2 1024 KiB");
  EXPECT_EQ(zen5.l1d_bytes, 48 << 10);
  EXPECT_EQ(zen5.l2_bytes, 1 << 20);
  EXPECT_EQ(zen5.l3_bytes, 32 << 20) << "a description without an L3 is an AMD host's 32 MiB, not the base's";
  EXPECT_EQ(zen5.isa, base.isa);
  const CpuTarget zen3 =
      TuningRecords::hardware_target(base, "AMD EPYC (family 25); L1d 32 KiB, L2 512 KiB, L3 32768 KiB");
  EXPECT_EQ(zen3.l2_bytes, 512 << 10);
  EXPECT_EQ(zen3.l3_bytes, 32 << 20);
  // This host's own description round-trips to its caches.
  const CpuTarget host = CpuTarget::host();
  const CpuTarget again = TuningRecords::hardware_target(base, host_hardware());
  EXPECT_EQ(again.l1d_bytes, host.l1d_bytes);
  EXPECT_EQ(again.l2_bytes, host.l2_bytes);
  EXPECT_EQ(again.l3_bytes, host.l3_bytes);
  // Descriptions without caches (or with absurd ones) leave the base alone.
  for (const char* text : {"unknown CPU", "L1d 0 KiB, L2 1024 KiB", "L1d 99999999999999999999 KiB, L2 1 KiB"}) {
    const CpuTarget t = TuningRecords::hardware_target(base, text);
    EXPECT_EQ(t.l1d_bytes, base.l1d_bytes) << text;
    EXPECT_EQ(t.l2_bytes, base.l2_bytes) << text;
  }
}

// A record is judged as its machine ran it: the vendor (the rules that differ by vendor) is the description's.
TEST(TuningRecords, HardwareDescriptionsGiveTheRecordingMachinesVendor) {
  CpuTarget base;
  base.intel = false;
  EXPECT_TRUE(
      TuningRecords::hardware_target(base, "Intel(R) Xeon(R) Processor (family 6); L1d 48 KiB, L2 2048 KiB").intel);
  base.intel = true;
  EXPECT_FALSE(TuningRecords::hardware_target(base, "AMD EPYC (family 26); L1d 48 KiB, L2 1024 KiB").intel);
  EXPECT_TRUE(TuningRecords::hardware_target(base, "unknown CPU").intel)
      << "a description without a vendor keeps the base's";
  const CpuTarget host = CpuTarget::host();
  EXPECT_EQ(TuningRecords::hardware_target(base, host_hardware()).intel, host.intel);
}

// The FMA rate decides which learned model may rank: recorded where measured, inferred for the older AMD records.
TEST(TuningRecords, HardwareDescriptionsGiveTheRecordingMachinesFmaRate) {
  CpuTarget base;
  base.isa = CpuIsa::Avx512;
  base.vector_fmas_per_cycle = 2;
  EXPECT_EQ(
      TuningRecords::hardware_target(base, "AMD EPYC 9R14 (family 25); L1d 32 KiB, L2 1024 KiB").vector_fmas_per_cycle,
      1)
      << "a Zen 4 splits 512-bit FMAs";
  base.vector_fmas_per_cycle = 1;
  EXPECT_EQ(TuningRecords::hardware_target(base, "AMD EPYC (family 26); L1d 48 KiB, L2 1024 KiB").vector_fmas_per_cycle,
            2);
  EXPECT_EQ(TuningRecords::hardware_target(base,
                                           "Intel(R) Xeon(R) Processor (family 6); L1d 48 KiB, L2 2048 KiB, "
                                           "L3 266240 KiB, AVX-512 FMAs 2/cycle")
                .vector_fmas_per_cycle,
            2);
  base.vector_fmas_per_cycle = 2;
  EXPECT_EQ(TuningRecords::hardware_target(base, "X (family 6); L1d 32 KiB, L2 1024 KiB, AVX-512 FMAs 1/cycle")
                .vector_fmas_per_cycle,
            1);
  // AVX2 records are AVX2 whatever the description says of AVX-512.
  CpuTarget avx2;
  EXPECT_EQ(TuningRecords::hardware_target(avx2, "AMD EPYC (family 25); L1d 32 KiB, L2 512 KiB").vector_fmas_per_cycle,
            2);
  // This host's description round-trips to its measured rate.
  const CpuTarget host = CpuTarget::host();
  EXPECT_EQ(TuningRecords::hardware_target(host, host_hardware()).vector_fmas_per_cycle, host.vector_fmas_per_cycle);
  if (host.isa == CpuIsa::Avx512) {
    EXPECT_TRUE(host.vector_fmas_per_cycle == 1 || host.vector_fmas_per_cycle == 2);
    EXPECT_EQ(host.cost_model_key(), host.vector_fmas_per_cycle == 2 ? "cpu:avx512:fma2" : "cpu:avx512");
  }
  EXPECT_EQ(CpuTarget::named("cpu:avx2").vector_fmas_per_cycle, 2);
  EXPECT_EQ(CpuTarget::named("cpu:avx2").cost_model_key(), "cpu:avx2");
}

}  // namespace
}  // namespace tessera
