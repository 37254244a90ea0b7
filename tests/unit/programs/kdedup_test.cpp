#include "kpipe/programs/kdedup.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fakes.h"
#include "helpers.h"
#include "kpipe/store/state_store.h"
#include "program_run.h"

// kdedup as a whole, short of the command line: the keys of several paths,
// and the state saved by an older kdedup whose keys of several paths read
// otherwise.

namespace kpipe {
namespace {

using test::TempDir;

using Result = test::ProgramRun;

Result run_tool(DedupOptions o, const std::string& input, const TempDir& dir) {
  Result r;
  test::run_program("kdedup", input, dir, o.input, r, [&](Io& io) { return run_dedup(o, io); });
  return r;
}

// What an older kdedup saved at checkpoint 1 after passing records of
// these keys (in its encoding, given here), with the checkpoint complete.
void save_old_state(const std::string& path, const std::vector<std::string>& keys) {
  FakeClock clock;
  DedupEngine engine(DedupConfig{}, clock);
  for (const std::string& k : keys) REQUIRE(engine.offer(k));
  StateChanges changes;
  engine.take_changes(changes);
  auto store = StateStore::open(path);
  REQUIRE(store.ok());
  REQUIRE((*store)->save_snapshot("kdedup", 1, changes, 5).ok());
  Checkpoint c;
  c.id = 1;
  REQUIRE((*store)->complete(c, "test", 6).ok());
}

void complete(const std::string& path, int64_t id) {
  auto store = StateStore::open(path);
  REQUIRE(store.ok());
  Checkpoint c;
  c.id = id;
  REQUIRE((*store)->complete(c, "test", 6).ok());
}

TEST_CASE("kdedup: the key of several paths is a JSON array of their values", "[kdedup]") {
  TempDir dir;
  DedupOptions o;
  o.keys = {".u", ".d"};
  Result r = run_tool(o,
                      "{\"u\":\"a\",\"d\":1}\n"
                      "{\"d\":1,\"u\":\"\\u0061\"}\n"
                      "{\"u\":1,\"d\":23}\n"
                      "{\"u\":12,\"d\":3}\n",
                      dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == "{\"u\":\"a\",\"d\":1}\n{\"u\":1,\"d\":23}\n{\"u\":12,\"d\":3}\n");
}

TEST_CASE("kdedup: a state of several-path keys saved by an older kdedup is refused", "[kdedup]") {
  TempDir dir;
  DedupOptions o;
  o.keys = {".u", ".d"};
  o.state = dir.file("state.db");
  save_old_state(o.state, {"\"a\",1"});
  Result r = run_tool(o, "{\"u\":\"a\",\"d\":1}\n", dir);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kFailure);
  CHECK(r.status.error().message ==
        "the saved state of 'kdedup' holds keys of several --key paths as an older kdedup wrote "
        "them, which this one would never match: give another --name or state file");
  CHECK(r.out.empty());

  // Under another name the stage starts afresh.
  o.name = "pairs";
  Result renamed = run_tool(o, "{\"u\":\"a\",\"d\":1}\n", dir);
  REQUIRE(renamed.status.ok());
  CHECK(renamed.out == "{\"u\":\"a\",\"d\":1}\n");
}

TEST_CASE("kdedup: a state of one-path keys saved by an older kdedup still matches", "[kdedup]") {
  TempDir dir;
  DedupOptions o;
  o.keys = {".id"};
  o.state = dir.file("state.db");
  // Escapes as written: one path's key is the value's text as it appears.
  save_old_state(o.state, {"1", "\"\\u0061\""});
  Result r = run_tool(o,
                      "{\"id\":1}\n{\"id\":\"\\u0061\"}\n{\"id\":\"a\"}\n"
                      "{\"$kpipe\":\"checkpoint\",\"id\":2,\"at\":7,\"offsets\":[]}\n",
                      dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == "{\"id\":\"a\"}\n{\"$kpipe\":\"checkpoint\",\"id\":2,\"at\":7,\"offsets\":[]}\n");
  CHECK(r.reporter.infos.at(0) ==
        "restored 2 keys of 'kdedup' from checkpoint 1 in '" + o.state + "'");

  // Marked from then on: the next run restores it as this kdedup's own.
  complete(o.state, 2);
  Result next = run_tool(o, "{\"id\":\"a\"}\n{\"id\":2}\n", dir);
  REQUIRE(next.status.ok());
  CHECK(next.out == "{\"id\":2}\n");
  CHECK(next.reporter.infos.at(0) ==
        "restored 3 keys of 'kdedup' from checkpoint 2 in '" + o.state + "'");
}

TEST_CASE("kdedup: a state of several-path keys saved by this kdedup is restored", "[kdedup]") {
  TempDir dir;
  DedupOptions o;
  o.keys = {".u", ".d"};
  o.state = dir.file("state.db");
  Result first = run_tool(o,
                          "{\"u\":\"a\",\"d\":1}\n"
                          "{\"$kpipe\":\"checkpoint\",\"id\":1,\"at\":7,\"offsets\":[]}\n",
                          dir);
  REQUIRE(first.status.ok());
  complete(o.state, 1);
  Result second = run_tool(o, "{\"u\":\"a\",\"d\":1}\n{\"u\":\"a\",\"d\":2}\n", dir);
  REQUIRE(second.status.ok());
  CHECK(second.out == "{\"u\":\"a\",\"d\":2}\n");
}

TEST_CASE("kdedup: a kafka: dead-letter topic takes the program's Kafka options", "[kdedup]") {
  TempDir dir;
  DedupOptions o;
  o.keys = {".id"};
  o.errors.dlq = "kafka:dead";
  o.kafka.brokers = "localhost:1";
  o.kafka.properties = {"no.such.property=1"};
  Result r = run_tool(o, "{\"id\":1}\n", dir);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kUsage);
  CHECK(r.status.error().message ==
        "kafka property 'no.such.property': No such configuration property: \"no.such.property\"");
}

TEST_CASE("kdedup: an input that is also the --dups file is refused", "[kdedup]") {
  TempDir dir;
  DedupOptions o;
  o.keys = {".id"};
  o.dups = dir.file("in.ndjson");
  Result r = run_tool(o, "{\"id\":1}\n{\"id\":1}\n", dir);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kUsage);
  CHECK(r.status.error().message == "input '" + dir.file("in.ndjson") +
                                        "' is also the --dups file: the program would read what "
                                        "it writes");
  CHECK(r.out.empty());
  CHECK(test::read_file(dir.file("in.ndjson")) == "{\"id\":1}\n{\"id\":1}\n");
}

// A run of `o` over `input`, then its checkpoint 1 completed: the state
// the next run restores.
void save_state(const DedupOptions& o, const std::string& input, const TempDir& dir) {
  Result r =
      run_tool(o, input + "{\"$kpipe\":\"checkpoint\",\"id\":1,\"at\":7,\"offsets\":[]}\n", dir);
  REQUIRE(r.status.ok());
  complete(o.state, 1);
}

std::string refusal(DedupOptions o, const TempDir& dir) {
  Result r = run_tool(o, "{\"id\":1,\"user_id\":1,\"ts\":5}\n", dir);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kFailure);
  CHECK(r.out.empty());
  return r.status.error().message;
}

TEST_CASE("kdedup: a state saved with another --key is refused, not restored to match nothing",
          "[kdedup]") {
  TempDir dir;
  DedupOptions o;
  o.keys = {".id"};
  o.state = dir.file("state.db");
  save_state(o, "{\"id\":1,\"user_id\":7}\n", dir);

  DedupOptions other = o;
  other.keys = {".user_id"};
  CHECK(refusal(other, dir) ==
        "the saved state of 'kdedup' was made with --key .id, not --key .user_id: give another "
        "--name or state file");
  other.keys = {".id", ".user_id"};
  CHECK(refusal(other, dir) ==
        "the saved state of 'kdedup' was made with --key .id, not --key .id --key .user_id: give "
        "another --name or state file");
  other.keys = {};
  CHECK(refusal(other, dir) ==
        "the saved state of 'kdedup' was made with --key .id, not no --key: give another --name or "
        "state file");

  // The same --key restores, whatever else changed that may change.
  DedupOptions same = o;
  same.max_keys = 10;
  Result r = run_tool(same, "{\"id\":1}\n{\"id\":2}\n", dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == "{\"id\":2}\n");
}

TEST_CASE("kdedup: a state whose times measure something else is refused", "[kdedup]") {
  TempDir dir;
  DedupOptions o;
  o.keys = {".id"};
  o.state = dir.file("state.db");
  o.within = "1d";
  o.time = ".ts";
  save_state(o, "{\"id\":1,\"ts\":5}\n", dir);

  DedupOptions other = o;
  other.time = "";
  CHECK(refusal(other, dir) ==
        "the saved state of 'kdedup' was made with --time .ts --time-unit ms, not --within without "
        "--time: give another --name or state file");
  other.within = "";
  CHECK(refusal(other, dir) ==
        "the saved state of 'kdedup' was made with --time .ts --time-unit ms, not no --within: "
        "give another --name or state file");
  other = o;
  other.time_unit = "s";
  CHECK(
      refusal(other, dir)
          .starts_with(
              "the saved state of 'kdedup' was made with --time .ts --time-unit ms, not --time .ts "
              "--time-unit s"));

  // Another horizon on the same clock restores.
  DedupOptions longer = o;
  longer.within = "2d";
  Result r = run_tool(longer, "{\"id\":1,\"ts\":6}\n{\"id\":2,\"ts\":6}\n", dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == "{\"id\":2,\"ts\":6}\n");
}

TEST_CASE("kdedup: a state of full keys restores without --exact, not the other way round",
          "[kdedup]") {
  TempDir dir;
  DedupOptions o;
  o.keys = {".id"};
  o.exact = true;
  o.state = dir.file("state.db");
  save_state(o, "{\"id\":1}\n", dir);
  DedupOptions hashed = o;
  hashed.exact = false;
  Result r = run_tool(hashed, "{\"id\":1}\n{\"id\":2}\n", dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == "{\"id\":2}\n");

  DedupOptions exact = o;
  exact.name = "hashed";
  exact.exact = false;
  save_state(exact, "{\"id\":1}\n", dir);
  exact.exact = true;
  CHECK(refusal(exact, dir) ==
        "the saved kdedup state holds hashes, not keys (it was saved without --exact)");
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

// The assigned line of an instance's kconsume: partitions of "events" and
// their epochs.
std::string assigned(const std::vector<std::pair<int32_t, int64_t>>& partitions) {
  PartitionEvent e;
  for (const auto& [p, epoch] : partitions) {
    e.partitions.push_back({"events", p});
    e.epochs.push_back(epoch);
  }
  std::string line;
  append_partition_event(line, e);
  return line;
}

std::string record(int32_t partition, int64_t offset, const std::string& id) {
  return fmt::format(
      "{{\"topic\":\"events\",\"partition\":{},\"offset\":{},\"value\":{{\"id\":\"{}\"}}}}\n",
      partition, offset, id);
}

DedupOptions instance_options(const TempDir& dir) {
  DedupOptions o;
  o.keys = {".value.id"};
  o.state = dir.file("state.db");
  return o;
}

TEST_CASE("kdedup: an instance keeps its keys per partition and restores those it is given",
          "[kdedup]") {
  TempDir dir;
  DedupOptions o = instance_options(dir);
  REQUIRE(claim(o.state, {0, 1}) == std::vector<int64_t>{1, 1});
  Checkpoint c{1, 7, {{"events", 0, 2, 1}, {"events", 1, 1, 1}}, "g", ""};
  std::string checkpoint;
  append_checkpoint(checkpoint, c);
  std::string both = assigned({{0, 1}, {1, 1}});
  Result first = run_tool(
      o, both + record(0, 0, "a") + record(1, 0, "b") + record(0, 1, "a") + checkpoint, dir);
  REQUIRE(first.status.ok());
  CHECK(first.out == both + record(0, 0, "a") + record(1, 0, "b") + checkpoint);
  CHECK(first.reporter.warnings.empty());
  CHECK(first.reporter.infos.back() ==
        "3 records in, 2 passed, 1 dropped; 2 keys remembered, 0 evicted");
  {
    // The terminal stage completes checkpoint 1.
    auto store = StateStore::open(o.state);
    REQUIRE(store.ok());
    REQUIRE((*store)->complete(c, "kcheckpoint", 8).ok());
  }

  // This instance restarts and gets partition 0 only: a's duplicate is
  // dropped, b (partition 1's) is new to it.
  REQUIRE(claim(o.state, {0}) == std::vector<int64_t>{2});
  std::string zero = assigned({{0, 2}});
  Result second = run_tool(o, zero + record(0, 2, "a") + record(0, 3, "b"), dir);
  REQUIRE(second.status.ok());
  CHECK(second.out == zero + record(0, 3, "b"));
  CHECK(second.reporter.infos.at(0) ==
        "restored 1 keys of 'kdedup' for events [0] from checkpoint 1 in '" + o.state + "'");
  CHECK(second.reporter.warnings.empty());

  // Partition 1's keys went to whichever instance took it: they are as
  // its last checkpoint left them.
  REQUIRE(claim(o.state, {1}) == std::vector<int64_t>{2});
  std::string one = assigned({{1, 2}});
  Result third = run_tool(o, one + record(1, 1, "b") + record(1, 2, "a"), dir);
  REQUIRE(third.status.ok());
  CHECK(third.out == one + record(1, 2, "a"));
  CHECK(third.reporter.infos.at(0) ==
        "restored 1 keys of 'kdedup' for events [1] from checkpoint 1 in '" + o.state + "'");
}

TEST_CASE("kdedup: an instance says once that keys came from two of its partitions", "[kdedup]") {
  TempDir dir;
  DedupOptions o = instance_options(dir);
  claim(o.state, {0, 1});
  std::string both = assigned({{0, 1}, {1, 1}});
  // Forty keys on partition 0, then the same on partition 1: each passes
  // on both (an instance keeps its keys per partition), and the stage,
  // which may look at some records only, sees the topic is not keyed by
  // them.
  std::string input = both, passed = both;
  for (int32_t p : {0, 1}) {
    for (int i = 0; i < 40; ++i) {
      input += record(p, i, fmt::format("k{}", i));
      passed += record(p, i, fmt::format("k{}", i));
    }
  }
  input += record(1, 40, "k0");  // a duplicate within partition 1 is dropped
  Result r = run_tool(o, input, dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == passed);
  REQUIRE(r.reporter.warnings.size() == 1);
  const std::string& warning = r.reporter.warnings[0];
  INFO(warning);
  CHECK(warning.starts_with("key \"k"));
  CHECK(warning.find("came from partitions events [0] and events [1]") != std::string::npos);
  CHECK(warning.ends_with(
      "an instance keeps its keys per partition, so duplicates across partitions pass; re-key "
      "the topic by it first: kconsume -t events --format value | kproduce -t events-rekeyed -k "
      ".id (kpipe(7), MANY INSTANCES)"));
}

TEST_CASE("kdedup: an instance's record of a partition not assigned, or of none, is bad input",
          "[kdedup]") {
  TempDir dir;
  DedupOptions o = instance_options(dir);
  claim(o.state, {0});
  std::string zero = assigned({{0, 1}});
  std::string in = dir.file("in.ndjson");

  Result unassigned = run_tool(o, zero + record(0, 0, "a") + record(1, 0, "b"), dir);
  REQUIRE_FALSE(unassigned.status.ok());
  CHECK(unassigned.status.error().status == ExitStatus::kDataError);
  CHECK(unassigned.status.error().message ==
        in + ": line 3: a record of events [1], a partition kconsume has not assigned");
  // What came before the bad line is out.
  CHECK(unassigned.out == zero + record(0, 0, "a"));

  Result bare = run_tool(o, zero + "{\"value\":{\"id\":\"a\"}}\n", dir);
  REQUIRE_FALSE(bare.status.ok());
  CHECK(bare.status.error().status == ExitStatus::kDataError);
  CHECK(bare.status.error().message ==
        in + ": line 2: a record without the envelope's 'topic' and 'partition', which an "
             "instance of a consumer group keeps its keys by");

  // Skipped like any bad line when told to.
  o.errors.on_error = "skip";
  Result skipped = run_tool(
      o, zero + record(1, 0, "b") + "{\"value\":{\"id\":\"a\"}}\n" + record(0, 0, "a"), dir);
  REQUIRE(skipped.status.ok());
  CHECK(skipped.out == zero + record(0, 0, "a"));
  CHECK(skipped.reporter.warnings == std::vector<std::string>{"skipped 2 bad lines"});
}

}  // namespace
}  // namespace kpipe
