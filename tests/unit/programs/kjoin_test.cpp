#include "kpipe/programs/kjoin.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kpipe/control.h"
#include "kpipe/kafka/client.h"
#include "kpipe/kafka/config.h"
#include "kpipe/kafka/mock_cluster.h"
#include "kpipe/store/sql.h"
#include "kpipe/store/state_store.h"
#include "program_run.h"

// kjoin as a whole, short of the command line, on file and SQLite tables:
// lookups held a few records deep come out in order, before the control
// lines and the bad line that follow them; a table of many rows is found
// whole; the table problems of kjoin(1) (bad rows, names that are not
// there, duplicate keys); the --as member is set where the line has it or
// added to its parent.

namespace kpipe {
namespace {

using test::TempDir;

using Result = test::ProgramRun;

Result run_tool(JoinOptions o, const std::string& input, const TempDir& dir) {
  Result r;
  test::run_program("kjoin", input, dir, o.input, r, [&](Io& io) { return run_join(o, io); });
  return r;
}

JoinOptions lookup(const TempDir& dir, const std::string& table) {
  JoinOptions o;
  o.table = dir.write("table.ndjson", table);
  o.table_keys = {".id"};
  o.keys = {".uid"};
  o.as = ".user";
  return o;
}

TEST_CASE("kjoin: records held for their lookups keep their order around control lines",
          "[kjoin]") {
  TempDir dir;
  JoinOptions o = lookup(dir, "{\"id\":1,\"n\":\"a\"}\n{\"id\":2,\"n\":\"b\"}\n");
  std::string input;
  std::string expected;
  for (int i = 0; i < 7; ++i) {
    int uid = i % 3;  // 0 has no row
    input += fmt::format("{{\"uid\":{},\"i\":{}}}\n", uid, i);
    std::string row =
        uid == 0 ? "null" : fmt::format("{{\"id\":{},\"n\":\"{}\"}}", uid, uid == 1 ? "a" : "b");
    expected += fmt::format("{{\"uid\":{},\"i\":{},\"user\":{}}}\n", uid, i, row);
    if (i == 2 || i == 5) {
      input += "{\"$kpipe\":\"other\",\"at\":" + std::to_string(i) + "}\n";
      expected += "{\"$kpipe\":\"other\",\"at\":" + std::to_string(i) + "}\n";
    }
  }
  Result r = run_tool(o, input, dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == expected);
}

TEST_CASE("kjoin: the records before a bad line are written before kjoin stops", "[kjoin]") {
  TempDir dir;
  JoinOptions o = lookup(dir, "{\"id\":1}\n");
  Result r =
      run_tool(o, "{\"uid\":1,\"i\":1}\n{\"uid\":1,\"i\":2}\n{\"uid\":1,\"i\":3}\nnot json\n", dir);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kDataError);
  CHECK(r.out ==
        "{\"uid\":1,\"i\":1,\"user\":{\"id\":1}}\n{\"uid\":1,\"i\":2,\"user\":{\"id\":1}}\n"
        "{\"uid\":1,\"i\":3,\"user\":{\"id\":1}}\n");
}

TEST_CASE("kjoin: every row of a large table is found", "[kjoin]") {
  TempDir dir;
  std::string table;
  for (int i = 0; i < 20000; ++i) table += fmt::format("{{\"id\":\"k{}\",\"v\":{}}}\n", i, i);
  JoinOptions o = lookup(dir, table);
  o.keys = {".k"};
  o.as = ".row";
  std::string input;
  std::string expected;
  for (int i = 19999; i >= 0; i -= 7) {
    input += fmt::format("{{\"k\":\"k{}\"}}\n", i);
    expected += fmt::format("{{\"k\":\"k{}\",\"row\":{{\"id\":\"k{}\",\"v\":{}}}}}\n", i, i, i);
  }
  Result r = run_tool(o, input, dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == expected);
}

// --- table problems (kjoin(1), Table problems) ------------------------------------

// A key in more than one row of a table read whole: the table does not
// say which row is the key's, so kjoin refuses it, whatever --on-error
// says (it kept the last in silence), naming the key, its rows, where it
// came again and how many other keys are duplicated. The rows are put a
// batch at a time: the duplicates here are far apart.
TEST_CASE("kjoin: a table file with duplicate keys is refused, the key named", "[kjoin]") {
  std::string on_error = GENERATE(std::string("fail"), std::string("skip"));
  TempDir dir;
  std::string table;
  for (int i = 0; i < 20000; ++i) table += fmt::format("{{\"id\":\"k{}\",\"v\":{}}}\n", i, i);
  table += "{\"id\":\"k7\",\"v\":\"again\"}\n";   // line 20001
  table += "{\"id\":\"k9\",\"v\":\"again\"}\n";   // line 20002
  table += "{\"id\":\"k7\",\"v\":\"thrice\"}\n";  // line 20003
  JoinOptions o = lookup(dir, table);
  o.errors.on_error = on_error;
  Result r = run_tool(o, "{\"uid\":\"k1\"}\n", dir);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kDataError);
  CHECK(r.status.error().message ==
        "table " + o.table +
            ": key k7 is in 3 rows (again at line 20001), and 1 other key is in more than "
            "one: a table has one row per key");
  CHECK(r.out.empty());
}

// As of, a key has one row per time: only a key and time twice is a
// duplicate.
TEST_CASE("kjoin: as of, only the same key and time twice is a duplicate", "[kjoin]") {
  TempDir dir;
  JoinOptions o = lookup(dir, "{\"id\":1,\"t\":10,\"v\":\"a\"}\n{\"id\":1,\"t\":20,\"v\":\"b\"}\n");
  o.as_of = ".t";
  o.table_time = ".t";
  Result r = run_tool(o, "{\"uid\":1,\"t\":15}\n{\"uid\":1,\"t\":25}\n", dir);
  REQUIRE(r.status.ok());
  CHECK(r.out ==
        "{\"uid\":1,\"t\":15,\"user\":{\"id\":1,\"t\":10,\"v\":\"a\"}}\n"
        "{\"uid\":1,\"t\":25,\"user\":{\"id\":1,\"t\":20,\"v\":\"b\"}}\n");

  o.table = dir.write("table.ndjson",
                      "{\"id\":1,\"t\":10}\n{\"id\":1,\"t\":20}\n{\"id\":2,\"t\":20}\n"
                      "{\"id\":1,\"t\":20,\"v\":\"again\"}\n");
  Result dup = run_tool(o, "{\"uid\":1,\"t\":15}\n", dir);
  REQUIRE_FALSE(dup.status.ok());
  CHECK(dup.status.error().status == ExitStatus::kDataError);
  CHECK(dup.status.error().message ==
        "table " + o.table +
            ": key 1 at time 1970-01-01T00:00:00.020Z is in 2 rows (again at line 4): a table has "
            "one row per key and time (--table-time)");
}

// A row whose key is null is a bad table row as one without the key is:
// under --on-error fail kjoin stops (exit 65) naming the table and the
// line (a null key was left out with a warning at exit, a missing one
// stopped kjoin); under skip both are left out, told in one warning.
TEST_CASE("kjoin: a table row with a null or missing key, under --on-error fail and skip",
          "[kjoin]") {
  TempDir dir;
  JoinOptions o =
      lookup(dir,
             "{\"id\":1,\"n\":\"a\"}\n{\"id\":null,\"n\":\"nobody\"}\n{\"n\":\"no id\"}\n"
             "{\"id\":2,\"n\":\"b\"}\n");
  const std::string input = "{\"uid\":1}\n{\"uid\":2}\n";
  SECTION("fail: the null key stops kjoin") {
    Result r = run_tool(o, input, dir);
    REQUIRE_FALSE(r.status.ok());
    CHECK(r.status.error().status == ExitStatus::kDataError);
    CHECK(r.status.error().message == "table " + o.table + ": line 2: field '.id' is null");
    CHECK(r.out.empty());
    CHECK(r.reporter.warnings.empty());
  }
  SECTION("fail: so does a missing key") {
    o.table = dir.write("table.ndjson", "{\"id\":1}\n{\"n\":\"no id\"}\n{\"id\":null}\n");
    Result r = run_tool(o, input, dir);
    REQUIRE_FALSE(r.status.ok());
    CHECK(r.status.error().status == ExitStatus::kDataError);
    CHECK(r.status.error().message == "table " + o.table + ": line 2: field '.id' is missing");
  }
  SECTION("skip: both left out, one warning naming the first") {
    o.errors.on_error = "skip";
    Result r = run_tool(o, input, dir);
    REQUIRE(r.status.ok());
    CHECK(r.out ==
          "{\"uid\":1,\"user\":{\"id\":1,\"n\":\"a\"}}\n{\"uid\":2,\"user\":{\"id\":2,\"n\":\"b\"}}"
          "\n");
    CHECK(
        r.reporter.warnings ==
        std::vector<std::string>{"left out 2 bad table rows (--on-error skip), the first: table " +
                                 o.table + ": line 2: field '.id' is null"});
  }
}

// A table file that is not there was named wrongly: a usage error (exit
// 2), as a column or an SQL table that is not there (it was exit 1).
TEST_CASE("kjoin: a table file that is not there is a usage error", "[kjoin]") {
  TempDir dir;
  JoinOptions o = lookup(dir, "");
  o.table = dir.file("no-such.ndjson");
  Result r = run_tool(o, "{\"uid\":1}\n", dir);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kUsage);
  CHECK(r.status.error().message == "--table: there is no file '" + o.table + "'");
}

// An SQLite file with `sql` run in it, for sqlite:FILE:TABLE tables.
std::string sqlite_file(const TempDir& dir, const std::string& sql) {
  std::string path = dir.file("table.db");
  auto db = Database::open(path, OpenOptions{});
  REQUIRE(db.ok());
  REQUIRE((*db)->exec(sql).ok());
  return path;
}

JoinOptions sql_lookup(const std::string& db, const std::string& table) {
  JoinOptions o;
  o.table = "sqlite:" + db + ":" + table;
  o.table_keys = {"id"};
  o.keys = {".uid"};
  o.as = ".user";
  return o;
}

// The same rules for an SQL table: a null key is a bad row named by its
// row number (it was left out with a warning at exit), duplicates are
// refused (any row of them was kept: an SQL table's rows come in no
// order), a column or a table that is not there is a usage error listing
// what is there (a missing table was exit 1 with SQLite's words; a
// missing column of an empty table was not told at all).
TEST_CASE("kjoin: an SQL table's null key, duplicates, missing column and table", "[kjoin]") {
  TempDir dir;
  std::string db = sqlite_file(dir,
                               "CREATE TABLE people (id INTEGER, name TEXT);"
                               "INSERT INTO people VALUES (1, 'a'), (NULL, 'b'), (2, 'c');"
                               "CREATE TABLE twice (id INTEGER, name TEXT);"
                               "INSERT INTO twice VALUES (1, 'a'), (2, 'b'), (1, 'c');"
                               "CREATE TABLE empty (key INTEGER, name TEXT);"
                               "CREATE VIEW v AS SELECT * FROM people;");
  const std::string input = "{\"uid\":1}\n{\"uid\":2}\n";
  const std::string name = "table people of " + db;
  SECTION("a null key, --on-error fail") {
    JoinOptions o = sql_lookup(db, "people");
    Result r = run_tool(o, input, dir);
    REQUIRE_FALSE(r.status.ok());
    CHECK(r.status.error().status == ExitStatus::kDataError);
    CHECK(r.status.error().message == name + ": row 2: column 'id' is null");
    CHECK(r.reporter.warnings.empty());
  }
  SECTION("a null key, --on-error skip") {
    JoinOptions o = sql_lookup(db, "people");
    o.errors.on_error = "skip";
    Result r = run_tool(o, input, dir);
    REQUIRE(r.status.ok());
    CHECK(r.out ==
          "{\"uid\":1,\"user\":{\"id\":1,\"name\":\"a\"}}\n"
          "{\"uid\":2,\"user\":{\"id\":2,\"name\":\"c\"}}\n");
    CHECK(r.reporter.warnings ==
          std::vector<std::string>{"left out 1 bad table row (--on-error skip), the first: " +
                                   name + ": row 2: column 'id' is null"});
  }
  SECTION("duplicate keys") {
    JoinOptions o = sql_lookup(db, "twice");
    o.errors.on_error = "skip";
    Result r = run_tool(o, input, dir);
    REQUIRE_FALSE(r.status.ok());
    CHECK(r.status.error().status == ExitStatus::kDataError);
    CHECK(r.status.error().message == "table twice of " + db +
                                          ": key 1 is in 2 rows (again at row 3): a table has one "
                                          "row per key");
  }
  SECTION("a --table-key column that is not there, listing the columns") {
    JoinOptions o = sql_lookup(db, "people");
    o.table_keys = {"uid"};
    Result r = run_tool(o, input, dir);
    REQUIRE_FALSE(r.status.ok());
    CHECK(r.status.error().status == ExitStatus::kUsage);
    CHECK(r.status.error().message ==
          "--table-key uid: table people has no such column (it has id, name)");
  }
  SECTION("a --table-time column that is not there, in a table with no rows") {
    JoinOptions o = sql_lookup(db, "empty");
    o.table_keys = {"key"};
    o.as_of = ".t";
    o.table_time = "t";
    Result r = run_tool(o, input, dir);
    REQUIRE_FALSE(r.status.ok());
    CHECK(r.status.error().status == ExitStatus::kUsage);
    CHECK(r.status.error().message ==
          "--table-time t: table empty has no such column (it has key, name)");
  }
  SECTION("a table that is not there, listing the tables and views") {
    JoinOptions o = sql_lookup(db, "peple");
    Result r = run_tool(o, input, dir);
    REQUIRE_FALSE(r.status.ok());
    CHECK(r.status.error().status == ExitStatus::kUsage);
    CHECK(r.status.error().message ==
          "--table: " + db + " has no table 'peple' (it has empty, people, twice, v)");
  }
  SECTION("an SQLite file that is not there") {
    JoinOptions o = sql_lookup(dir.file("no-such.db"), "people");
    Result r = run_tool(o, input, dir);
    REQUIRE_FALSE(r.status.ok());
    CHECK(r.status.error().status == ExitStatus::kUsage);
    CHECK(r.status.error().message ==
          "--table: there is no SQLite file '" + dir.file("no-such.db") + "'");
  }
}

TEST_CASE("kjoin: --as replaces a member in place or adds it to its parent", "[kjoin]") {
  TempDir dir;
  JoinOptions o = lookup(dir, "{\"id\":1}\n");
  o.as = ".value.user";
  o.keys = {".value.uid"};
  Result r = run_tool(o,
                      "{\"value\":{\"user\": 5 ,\"uid\":1},\"z\":0}\n"
                      "{\"value\":{\"uid\":1} , \"z\":0}\n"
                      "  {\"value\":{ },\"z\":1}  \n",
                      dir);
  // The last line has no key: bad input, after the two before it.
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.out ==
        "{\"value\":{\"user\": {\"id\":1} ,\"uid\":1},\"z\":0}\n"
        "{\"value\":{\"uid\":1,\"user\":{\"id\":1}} , \"z\":0}\n");
}

// --- an instance of a consumer group (kpipe(7), MANY INSTANCES) -------------

// kconsume's part in an instance, done by hand: claims `partitions` of
// "events" in the store and returns the epoch each got.
std::vector<int64_t> claim(const std::string& path, const std::vector<int32_t>& partitions) {
  auto store = StateStore::open(path);
  REQUIRE(store.ok());
  std::vector<TopicPartition> tps;
  for (int32_t p : partitions) tps.push_back({"events", p});
  auto claims = (*store)->claim(tps, 5);
  REQUIRE(claims.ok());
  std::vector<int64_t> epochs;
  for (const auto& c : *claims) epochs.push_back(c.epoch);
  return epochs;
}

std::string partitions_line(PartitionEvent::Kind kind,
                            const std::vector<std::pair<int32_t, int64_t>>& partitions) {
  PartitionEvent e;
  e.kind = kind;
  for (const auto& [p, epoch] : partitions) {
    e.partitions.push_back({"events", p});
    if (kind == PartitionEvent::Kind::kAssigned) e.epochs.push_back(epoch);
  }
  std::string line;
  append_partition_event(line, e);
  return line;
}

std::string event(int32_t partition, int64_t offset, Millis ts, const std::string& user = "") {
  std::string joined = user.empty() ? "" : ",\"user\":" + user;
  return fmt::format(
      "{{\"topic\":\"events\",\"partition\":{},\"offset\":{},\"value\":{{\"uid\":\"u1\",\"ts\":{}"
      "{}}}}}\n",
      partition, offset, ts, joined);
}

// A table topic on librdkafka's mock cluster: key u1 is "a" from time 1000
// and "b" from 3000, so the table's watermark is 3000 and a record after
// it waits.
struct InstanceTable {
  RecordingReporter reporter;
  std::unique_ptr<MockCluster> mock;
  KafkaOptions kafka;

  // Versions of u1 as (time, value): by default "a" from 1000, "b" from 3000.
  explicit InstanceTable(const std::vector<std::pair<Millis, std::string>>& versions = {
                             {1000, R"({"n":"a"})"}, {3000, R"({"n":"b"})"}}) {
    auto m = MockCluster::create(1, reporter);
    REQUIRE(m.ok());
    mock = std::move(*m);
    REQUIRE(mock->create_topic("users", 1).ok());
    kafka.brokers = mock->bootstraps();
    auto config = resolve_kafka_config(kafka, nullptr);
    REQUIRE(config.ok());
    SystemClock clock;
    auto producer = Producer::create(*config, reporter, clock);
    REQUIRE(producer.ok());
    for (const auto& [time, value] : versions)
      REQUIRE((*producer)->write("users", 0, "u1", value, {}, time).ok());
    REQUIRE((*producer)->flush(10 * kSecond).ok());
  }

  JoinOptions options(const TempDir& dir) const {
    JoinOptions o;
    o.table = "kafka:users";
    o.kafka = kafka;
    o.keys = {".value.uid"};
    o.as = ".value.user";
    o.as_of = ".value.ts";
    o.state = dir.file("state.db");
    return o;
  }
};

TEST_CASE("kjoin: an instance keeps the records waiting per partition, and hands them over",
          "[kjoin]") {
  InstanceTable table;
  TempDir dir;
  JoinOptions o = table.options(dir);
  REQUIRE(claim(o.state, {0, 1}) == std::vector<int64_t>{1, 1});
  std::string both = partitions_line(PartitionEvent::Kind::kAssigned, {{0, 1}, {1, 1}});
  std::string revoke_one = partitions_line(PartitionEvent::Kind::kRevoked, {{1, 0}});
  Checkpoint c{1, 7, {{"events", 0, 2, 1}, {"events", 1, 1, 1}}, "g", ""};
  std::string checkpoint;
  append_checkpoint(checkpoint, c);
  std::string other = "{\"$kpipe\":\"other\"}\n";
  // 2000 is joined at once; 5000 (partition 1) and 4000 (partition 0) wait
  // for the table, and the control line between them waits behind the
  // first. The checkpoint goes on at once: they are in the partitions'
  // states it saves. Partition 1 is then revoked: its record goes with its
  // state, to be joined by its next owner, not by this instance.
  Result first = run_tool(o,
                          both + event(0, 0, 2000) + event(1, 0, 5000) + other + event(0, 1, 4000) +
                              checkpoint + revoke_one,
                          dir);
  REQUIRE(first.status.ok());
  CHECK(first.out == both + event(0, 0, 2000, R"({"n":"a"})") + checkpoint + revoke_one + other +
                         event(0, 1, 4000, R"({"n":"b"})"));
  CHECK(first.reporter.infos.back() == "3 records in, 2 joined, 0 missed, 0 dropped; table 1 rows");
  {
    // The terminal stage completes checkpoint 1.
    auto store = StateStore::open(o.state);
    REQUIRE(store.ok());
    REQUIRE((*store)->complete(c, "kcheckpoint", 8).ok());
  }

  // Partition 1's next owner (read the table whole again) restores the
  // record that waited, and joins it once, before the partition's records
  // after it.
  REQUIRE(claim(o.state, {1}) == std::vector<int64_t>{2});
  std::string one = partitions_line(PartitionEvent::Kind::kAssigned, {{1, 2}});
  Result second = run_tool(o, one + event(1, 1, 2500), dir);
  REQUIRE(second.status.ok());
  CHECK(second.out == one + event(1, 0, 5000, R"({"n":"b"})") + event(1, 1, 2500, R"({"n":"a"})"));
  CHECK(std::find(second.reporter.infos.begin(), second.reporter.infos.end(),
                  "restored 1 records waiting for the table of 'kjoin' for events [1] from "
                  "checkpoint 1 in '" +
                      o.state + "'") != second.reporter.infos.end());
}

// A partition taken over may be far behind those the instance read
// before: the versions its records need are kept until it has read one
// (found by join_instances, as of, with the table pruned by the time of
// the instance's other partitions).
TEST_CASE("kjoin: an instance keeps the versions a partition that has read nothing may need",
          "[kjoin]") {
  // More versions than a prune waits for (1024): "v1" from 1000, "v2"
  // from 2000, and so on.
  std::vector<std::pair<Millis, std::string>> versions;
  for (int i = 1; i <= 1100; ++i) versions.emplace_back(i * 1000, fmt::format(R"({{"n":{}}})", i));
  InstanceTable table(versions);
  TempDir dir;
  JoinOptions o = table.options(dir);
  o.watermark = "10s";
  REQUIRE(claim(o.state, {0, 1}) == std::vector<int64_t>{1, 1});
  std::string both = partitions_line(PartitionEvent::Kind::kAssigned, {{0, 1}, {1, 1}});
  // Partition 0 is read to 1,200 s first, past the table (its record
  // waits, and the versions before 1,190 s are no longer needed by it);
  // partition 1 then starts at 1.5 s, and needs the version from 1 s.
  Result r = run_tool(o, both + event(0, 0, 1'200'000) + event(1, 0, 1500), dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == both + event(1, 0, 1500, R"({"n":1})") + event(0, 0, 1'200'000, R"({"n":1100})"));
}

// The entries a store holds for a stage's partition.
struct Entries final : Snapshottable {
  std::vector<std::string> keys;
  void take_changes(StateChanges&) override {}
  Status restore_entry(std::string_view key, std::string_view) override {
    keys.emplace_back(key);
    return {};
  }
  Status finish_restore() override { return {}; }
};

TEST_CASE("kjoin: an instance saves the records waiting per partition, and no table", "[kjoin]") {
  InstanceTable table;
  TempDir dir;
  JoinOptions o = table.options(dir);
  claim(o.state, {0, 1});
  std::string both = partitions_line(PartitionEvent::Kind::kAssigned, {{0, 1}, {1, 1}});
  Checkpoint c{1, 7, {{"events", 0, 1, 1}, {"events", 1, 1, 1}}, "g", ""};
  std::string checkpoint;
  append_checkpoint(checkpoint, c);
  Result r = run_tool(o, both + event(0, 0, 2000) + event(1, 0, 5000) + checkpoint, dir);
  REQUIRE(r.status.ok());
  auto store = StateStore::open(o.state);
  REQUIRE(store.ok());
  REQUIRE((*store)->complete(c, "kcheckpoint", 8).ok());
  Entries zero, one;
  REQUIRE((*store)->restore_slice("kjoin", {"events", 0}, zero).ok());
  REQUIRE((*store)->restore_slice("kjoin", {"events", 1}, one).ok());
  // The table's rows and offsets ("v/", "o/") are in no partition's state:
  // every instance reads the table whole (it is the same in all).
  CHECK(zero.keys == std::vector<std::string>{"!format", "!options"});
  std::sort(one.keys.begin(), one.keys.end());
  CHECK(one.keys == std::vector<std::string>{"!format", "!options", "q/0000000000000001"});
}

TEST_CASE("kjoin: an instance's waiting record of a partition not assigned is bad input",
          "[kjoin]") {
  InstanceTable table;
  TempDir dir;
  JoinOptions o = table.options(dir);
  claim(o.state, {0});
  std::string zero = partitions_line(PartitionEvent::Kind::kAssigned, {{0, 1}});
  Result r = run_tool(o, zero + event(0, 0, 2000) + event(1, 0, 2000), dir);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kDataError);
  CHECK(r.status.error().message ==
        dir.file("in.ndjson") +
            ": line 3: a record of events [1], a partition kconsume has not "
            "assigned");
  CHECK(r.out == zero + event(0, 0, 2000, R"({"n":"a"})"));
}

TEST_CASE("kjoin: a lookup join runs in an instance, its table read whole and not saved",
          "[kjoin]") {
  TempDir dir;
  JoinOptions o = lookup(dir, "{\"id\":1,\"n\":\"a\"}\n");
  o.keys = {".value.uid"};
  o.as = ".value.user";
  o.state = dir.file("state.db");
  claim(o.state, {0});
  std::string zero = partitions_line(PartitionEvent::Kind::kAssigned, {{0, 1}});
  Checkpoint c{1, 7, {{"events", 0, 1, 1}}, "g", ""};
  std::string checkpoint;
  append_checkpoint(checkpoint, c);
  std::string in = zero + "{\"topic\":\"events\",\"partition\":0,\"value\":{\"uid\":1}}\n" +
                   "{\"value\":{\"uid\":2}}\n" + checkpoint;
  Result r = run_tool(o, in, dir);
  REQUIRE(r.status.ok());
  CHECK(r.out ==
        zero +
            "{\"topic\":\"events\",\"partition\":0,\"value\":{\"uid\":1,\"user\":{\"id\":1,"
            "\"n\":\"a\"}}}\n{\"value\":{\"uid\":2,\"user\":null}}\n" +
            checkpoint);
}

}  // namespace
}  // namespace kpipe
