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

}  // namespace
}  // namespace kpipe
