#include "kpipe/dead_letter.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kpipe/dlq_store.h"
#include "kpipe/filter.h"

namespace kpipe {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kpipe-dl-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

std::unique_ptr<DlqStore> store_at(const std::string& path) {
  auto s = DlqStore::open(path);
  if (!s) FAIL(s.error().message);
  return std::move(*s);
}

size_t stored(const std::string& path) {
  size_t n = 0;
  REQUIRE(store_at(path)->scan({}, 0, false, [&](const DlqEntry&) -> Status {
    ++n;
    return {};
  }).ok());
  return n;
}

Line line_of(const std::string& padded, size_t size, uint64_t number) {
  Line line;
  line.text = std::string_view(padded.data(), size);
  line.number = number;
  return line;
}

std::string padded(const std::string& s) { return s + std::string(kJsonPadding, '\0'); }

TEST_CASE("on-error fail names the input, the line and the reason", "[dead_letter]") {
  FakeClock clock;
  BadInputHandler bad(OnError::kFail, nullptr, "kdedup", clock);
  std::string text = padded("{");
  Status s = bad.handle("events.ndjson", line_of(text, 1, 17), "not valid JSON: empty");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kDataError);
  CHECK(s.error().message == "events.ndjson: line 17: not valid JSON: empty");
}

TEST_CASE("on-error skip counts, and says so", "[dead_letter]") {
  FakeClock clock;
  BadInputHandler bad(OnError::kSkip, nullptr, "kdedup", clock);
  std::string text = padded("{");
  REQUIRE(bad.handle("<stdin>", line_of(text, 1, 1), "r").ok());
  REQUIRE(bad.handle("<stdin>", line_of(text, 1, 2), "r").ok());
  CHECK(bad.skipped() == 2);
  CHECK(bad.summary() == "skipped 2 bad lines");
}

TEST_CASE("on-error dlq stores the line, the stage, the reason with its line number, the source", "[dead_letter]") {
  TempDir dir;
  std::string path = dir.file("bad.db");
  FakeClock clock(1795946400010);
  BadInputHandler bad(OnError::kDlq, make_store_sink(store_at(path)), "kdedup/orders", clock);
  std::string envelope = "{\"topic\":\"events\",\"partition\":3,\"offset\":42,\"value\":{\"x\":1}}";
  std::string text = padded(envelope);
  REQUIRE(bad.handle("<stdin>", line_of(text, envelope.size(), 9), "field '.value.ts' is missing").ok());
  REQUIRE(bad.sync().ok());
  std::vector<DlqEntry> got;
  REQUIRE(store_at(path)->scan({}, 0, true, [&](const DlqEntry& e) -> Status {
    got.push_back(e);
    return {};
  }).ok());
  REQUIRE(got.size() == 1);
  CHECK(got[0].stage == "kdedup/orders");
  CHECK(got[0].reason == "line 9: field '.value.ts' is missing");
  CHECK(got[0].input == "<stdin>");
  CHECK(got[0].line == 9);
  CHECK(got[0].at == 1795946400010);
  CHECK(got[0].payload == envelope);
  REQUIRE(got[0].source);
  CHECK(got[0].source->topic == "events");
  CHECK(got[0].source->partition == 3);
  CHECK(got[0].source->offset == 42);
  CHECK(bad.dead_lettered() == 1);
  CHECK(bad.summary() == "sent 1 line to the dead-letter store " + path);
}

TEST_CASE("dead letters are batched, but synced after kSyncEvery or kSyncInterval", "[dead_letter]") {
  TempDir dir;
  std::string path = dir.file("bad.db");
  FakeClock clock;
  BadInputHandler bad(OnError::kDlq, make_store_sink(store_at(path)), "k", clock);
  std::string text = padded("x");
  REQUIRE(bad.handle("<stdin>", line_of(text, 1, 1), "r").ok());
  clock.advance(BadInputHandler::kSyncInterval - 1);
  REQUIRE(bad.tick().ok());
  CHECK(stored(path) == 0);
  clock.advance(1);
  REQUIRE(bad.tick().ok());
  CHECK(stored(path) == 1);

  for (uint64_t i = 0; i + 1 < BadInputHandler::kSyncEvery; ++i)
    REQUIRE(bad.handle("<stdin>", line_of(text, 1, i + 2), "r").ok());
  CHECK(stored(path) == 1);
  REQUIRE(bad.handle("<stdin>", line_of(text, 1, 5000), "r").ok());
  CHECK(stored(path) == 1 + BadInputHandler::kSyncEvery);
}

// A stage that refuses lines starting with '!', and advances the clock a
// little per line, as a busy stream does.
class ClockedStage final : public LineStage {
 public:
  ClockedStage(FakeClock& clock, std::function<void(uint64_t)> on_good) : clock_(clock), on_good_(on_good) {}
  Status on_line(const Line& line, Output& out) override {
    clock_.advance(50);
    if (line.text.starts_with("!")) return data_error("refused");
    on_good_(line.number);
    out.write_line(line.text);
    return {};
  }

 private:
  FakeClock& clock_;
  std::function<void(uint64_t)> on_good_;
};

TEST_CASE("a dead letter followed only by good lines is durable within the sync interval", "[dead_letter]") {
  // Before: the batch was synced only by the next dead letter, a control
  // line, a pause in the input or the end, so a busy stream of good lines
  // kept one dead letter unwritten (and the store locked) indefinitely.
  TempDir dir;
  std::string db = dir.file("bad.db");
  std::string input = dir.file("in.ndjson");
  {
    std::ofstream f(input);
    f << "!bad\n";
    for (int i = 0; i < 20; ++i) f << "{\"good\":" << i << "}\n";
  }
  FakeClock clock;
  RecordingReporter reporter;
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  REQUIRE(devnull >= 0);
  Output out(devnull);
  Io io{out, reporter, clock, nullptr, "ktest"};
  BadInputHandler bad(OnError::kDlq, make_store_sink(store_at(db)), "ktest", clock);
  std::map<uint64_t, size_t> seen;  // line number -> dead letters stored when it was processed
  ClockedStage stage(clock, [&](uint64_t n) { seen[n] = stored(db); });
  FilterSettings settings;
  settings.input.inputs = {input};
  REQUIRE(run_filter(stage, settings, bad, io).ok());
  ::close(devnull);
  CHECK(seen[2] == 0);   // batched: 50 ms after the dead letter
  CHECK(seen[10] == 1);  // 450 ms after: synced, with no pause and no control line
  CHECK(stored(db) == 1);
}

}  // namespace
}  // namespace kpipe
