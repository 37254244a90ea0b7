#include "kpipe/programs/kdedup.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fakes.h"
#include "helpers.h"
#include "kpipe/store/state_store.h"

// kdedup as a whole, short of the command line: the keys of several paths,
// and the state saved by an older kdedup whose keys of several paths read
// otherwise.

namespace kpipe {
namespace {

using test::TempDir;

struct Result {
  Status status;
  std::string out;
  RecordingReporter reporter;
};

Result run_tool(DedupOptions o, const std::string& input, const TempDir& dir) {
  Result r;
  o.input.inputs = {dir.write("in.ndjson", input)};
  int fd = ::open(dir.file("out.ndjson").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  REQUIRE(fd >= 0);
  {
    Output out(fd, "<stdout>");
    FakeClock clock(1795946400000);
    Io io{out, r.reporter, clock, nullptr, "kdedup", nullptr};
    r.status = run_dedup(o, io);
    (void)out.flush();
  }
  ::close(fd);
  r.out = test::read_file(dir.file("out.ndjson"));
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

}  // namespace
}  // namespace kpipe
