#include "kpipe/programs/kupsert.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>

#include "fakes.h"
#include "store/upsert_fixtures.h"

using namespace kpipe;

using namespace kpipe::upsert_test;

// --- the stage -----------------------------------------------------------------

namespace {

// A stage over files, as kupsert runs it: the table's database, a state
// database (or none), output to a file, a fake clock.
struct StageRig {
  TempDir dir;
  std::string db_path = dir.file("out.db");
  std::unique_ptr<Database> db = open_db(db_path);
  std::unique_ptr<StateStore> store;
  std::unique_ptr<UpsertWriter> w;
  FakeClock clock{1000000};
  RecordingReporter reporter;
  int out_fd = ::open(dir.file("stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  Output out{out_fd, "stdout"};
  std::atomic<bool> stop{false};  // SIGINT or SIGTERM
  Io io{out, reporter, clock, &stop, "kupsert"};
  BadInputHandler bad{OnError::kSkip, nullptr, "kupsert", clock};
  std::unique_ptr<UpsertStage> stage;
  Lines lines;

  enum class State { kNone, kSameFile, kOtherFile };
  explicit StageRig(State state, int64_t batch = 1000) {
    if (state == State::kSameFile) store = StateStore::attach(*db).value();
    if (state == State::kOtherFile) store = StateStore::open(dir.file("state.db")).value();
    w = writer(*db, spec("t", {"k"}));
    stage = std::make_unique<UpsertStage>(*w, store.get(), state == State::kSameFile, batch,
                                          "kupsert", bad, io);
  }
  ~StageRig() { ::close(out_fd); }

  void line(const std::string& text) {
    Line l = lines.make(text);
    Status s = is_control_line(text) ? stage->on_control(l, out) : stage->on_line(l, out);
    if (!s.ok()) FAIL(s.error().message);
  }
  // What another connection sees: committed rows only.
  int64_t visible() {
    auto reader = open_db(db_path);
    auto exists = count(*reader, "SELECT COUNT(*) FROM sqlite_schema WHERE name = 't'");
    return exists == 0 ? 0 : count(*reader, "SELECT COUNT(*) FROM t");
  }
  std::string written() {
    REQUIRE(out.flush().ok());
    std::string s;
    FILE* f = std::fopen(dir.file("stdout").c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
    return s;
  }
};

std::string checkpoint(int64_t id, int64_t offset) {
  return fmt::format(
      R"({{"$kpipe":"checkpoint","id":{},"at":5,"offsets":[{{"topic":"e","partition":0,"offset":{}}}]}})",
      id, offset);
}

}  // namespace

TEST_CASE("stage: a batch commits when it is full") {
  StageRig rig(StageRig::State::kNone, 3);
  rig.line(R"({"k":1})");
  rig.line(R"({"k":2})");
  CHECK(rig.visible() == 0);
  rig.line(R"({"k":3})");
  CHECK(rig.visible() == 3);
}

TEST_CASE("stage: a slow stream lands within a second") {
  StageRig rig(StageRig::State::kNone);
  rig.line(R"({"k":1})");
  rig.clock.advance(kMaxBatchDelay - 1);
  rig.line(R"({"k":2})");
  CHECK(rig.visible() == 0);
  rig.clock.advance(1);
  rig.line(R"({"k":3})");
  CHECK(rig.visible() == 3);
  // A pause in the input lands what was read at once.
  rig.line(R"({"k":4})");
  REQUIRE(rig.stage->on_idle(rig.out).ok());
  CHECK(rig.visible() == 4);
  rig.line(R"({"k":5})");
  REQUIRE(rig.stage->on_end(rig.out).ok());
  CHECK(rig.visible() == 5);
}

TEST_CASE("stage, exactly-once: rows commit only with the checkpoint after them") {
  StageRig rig(StageRig::State::kSameFile, 2);
  rig.line(R"({"k":1})");
  rig.line(R"({"k":2})");
  rig.line(R"({"k":3})");
  rig.clock.advance(10 * kSecond);
  REQUIRE(rig.stage->on_idle(rig.out).ok());
  CHECK(rig.visible() == 0);  // neither --batch nor time commits them
  rig.line(checkpoint(1, 3));
  CHECK(rig.visible() == 3);
  auto offsets = rig.store->offsets();
  REQUIRE(offsets.ok());
  REQUIRE(offsets->size() == 1);
  CHECK((*offsets)[0].offset == 3);
  CHECK((*offsets)[0].checkpoint == 1);
  CHECK(rig.written().empty());
}

TEST_CASE(
    "stage, exactly-once: at the end of the input the rows after the last checkpoint are written") {
  // kwindow --flush-at-end fires its last windows after kconsume's last
  // checkpoint.
  StageRig rig(StageRig::State::kSameFile);
  rig.line(R"({"k":1})");
  rig.line(checkpoint(1, 1));
  rig.line(R"({"k":2})");
  REQUIRE(rig.stage->on_end(rig.out).ok());
  CHECK(rig.visible() == 2);
  CHECK(rig.reporter.warnings.empty());
}

TEST_CASE(
    "stage, exactly-once: stopped by a signal, the rows after the last checkpoint are left for the "
    "replay") {
  StageRig rig(StageRig::State::kSameFile);
  rig.line(R"({"k":1})");
  rig.line(checkpoint(1, 1));
  rig.line(R"({"k":2})");
  rig.stop = true;
  REQUIRE(rig.stage->on_end(rig.out).ok());
  CHECK(rig.visible() == 1);
  CHECK(rig.reporter.warnings.empty());
  REQUIRE(rig.reporter.infos.size() == 1);
  CHECK(rig.reporter.infos[0] ==
        "1 rows after the last checkpoint were not written: a restart replays them from that "
        "checkpoint");
}

TEST_CASE("stage, exactly-once: the rows and the checkpoint fail together") {
  StageRig rig(StageRig::State::kSameFile);
  rig.line(checkpoint(5, 10));
  rig.line(R"({"k":1})");
  // An older checkpoint after a newer one is a protocol error: nothing of
  // it commits, rows included.
  Status s = rig.stage->on_control(rig.lines.make(checkpoint(4, 11)), rig.out);
  REQUIRE_FALSE(s.ok());
  CHECK(rig.visible() == 0);
  CHECK((*rig.store->latest_complete()).value() == 5);
}

TEST_CASE("stage, exactly-once: no checkpoint at all is warned of") {
  StageRig rig(StageRig::State::kSameFile);
  rig.line(R"({"k":1})");
  REQUIRE(rig.stage->on_end(rig.out).ok());
  CHECK(rig.visible() == 1);
  REQUIRE(rig.reporter.warnings.size() == 1);
  CHECK(rig.reporter.warnings[0].starts_with(
      "1 rows arrived but no checkpoint line: run kconsume with --state"));
}

TEST_CASE("stage, at-least-once: rows commit before the checkpoint completes in the other file") {
  StageRig rig(StageRig::State::kOtherFile);
  rig.line(R"({"k":1})");
  CHECK(rig.visible() == 0);
  rig.line(checkpoint(1, 1));
  CHECK(rig.visible() == 1);
  CHECK((*rig.store->latest_complete()).value() == 1);
  CHECK(count(*rig.db, "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'checkpoints'") == 0);
  CHECK(rig.written().empty());
}

TEST_CASE(
    "stage, without --state: checkpoints go on after the rows before them, other control lines "
    "too") {
  StageRig rig(StageRig::State::kNone);
  rig.line(R"({"k":1})");
  rig.line(checkpoint(1, 1));
  CHECK(rig.visible() == 1);
  rig.line(R"({"$kpipe":"hello","x":1})");
  CHECK(rig.written() == checkpoint(1, 1) + "\n" + R"({"$kpipe":"hello","x":1})" + "\n");
}

TEST_CASE("stage: refused rows go to --on-error with their own line numbers") {
  StageRig rig(StageRig::State::kNone, 10);
  REQUIRE(rig.db->exec("CREATE TABLE t2 (k PRIMARY KEY, v CHECK (v > 0))").ok());
  auto w = writer(*rig.db, spec("t2", {"k"}));
  BadInputHandler fail(OnError::kFail, nullptr, "kupsert", rig.clock);
  UpsertStage stage(*w, nullptr, false, 2, "kupsert", fail, rig.io);
  REQUIRE(stage.on_line(rig.lines.make(R"({"k":1,"v":-1})"), rig.out).ok());  // line 1
  Status s =
      stage.on_line(rig.lines.make(R"({"k":2,"v":1})"), rig.out);  // line 2: the batch commits
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kDataError);
  CHECK(s.error().message ==
        "<stdin>: line 1: the table refused the row: CHECK constraint failed: v > 0");
  CHECK(fail.failed());
  CHECK(count(*rig.db, "SELECT COUNT(*) FROM t2") == 0);  // the batch rolled back
}

TEST_CASE("stage: under fail, the rows before a refused row are written, not those after") {
  StageRig rig(StageRig::State::kNone, 10);
  REQUIRE(rig.db->exec("CREATE TABLE t2 (k PRIMARY KEY, v CHECK (v > 0))").ok());
  auto w = writer(*rig.db, spec("t2", {"k"}));
  BadInputHandler fail(OnError::kFail, nullptr, "kupsert", rig.clock);
  UpsertStage stage(*w, nullptr, false, 4, "kupsert", fail, rig.io);
  REQUIRE(stage.on_line(rig.lines.make(R"({"k":1,"v":1})"), rig.out).ok());
  REQUIRE(stage.on_line(rig.lines.make(R"({"k":2,"v":2})"), rig.out).ok());
  REQUIRE(stage.on_line(rig.lines.make(R"({"k":3,"v":-3})"), rig.out).ok());
  Status s = stage.on_line(rig.lines.make(R"({"k":4,"v":4})"), rig.out);  // the batch commits
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        "<stdin>: line 3: the table refused the row: CHECK constraint failed: v > 0");
  CHECK(count(*rig.db, "SELECT COUNT(*) FROM t2") == 2);
  CHECK(count(*rig.db, "SELECT SUM(k) FROM t2") == 3);  // 1 and 2
}
