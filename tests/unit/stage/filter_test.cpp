#include "kpipe/stage/filter.h"
#include "kpipe/programs/dlq_targets.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <functional>

#include "fakes.h"
#include "helpers.h"
#include "kpipe/json.h"
#include "kpipe/store/dlq_store.h"

using namespace kpipe;
using kpipe::test::Pipe;
using kpipe::test::TempDir;

namespace {

constexpr Millis kNow = 1795947330123;

// The smallest real stage: writes the raw text of `.v` for each record,
// refuses records without it, and fails hard on {"v":"boom"}.
class ValueStage final : public LineStage {
 public:
  std::function<void(const Line&)> before_each;  // runs first in on_line
  std::function<Status(Output&)> idle;
  std::function<void()> waiting;  // runs in before_wait
  Millis idle_every = 200;

  Status on_line(const Line& line, Output& out) override {
    seen.push_back(line.number);
    if (before_each) before_each(line);
    KPIPE_TRY(reader_.read(line.text, fields_, values_));
    const JsonField& v = values_[0];
    if (v.type == JsonType::kMissing) return data_error("field '.v' is missing");
    if (v.type == JsonType::kString && v.str == "boom")
      return failure("cannot write 'disk': on fire");
    out.write_line(v.raw);
    ++written_;
    return {};
  }
  Status on_control(const Line& line, Output& out) override {
    controls.emplace_back(line.text);
    return LineStage::on_control(line, out);
  }
  Status on_idle(Output& out) override { return idle ? idle(out) : Status(); }
  Status before_wait(Output&) override {
    if (waiting) waiting();
    return {};
  }
  Millis idle_interval() const override { return idle_every; }
  Status on_end(Output& out) override {
    ended = true;
    out.write_line("END");
    return {};
  }
  void fill_counters(Counters& c) const override { c.out = written_; }

  std::vector<uint64_t> seen;
  std::vector<std::string> controls;
  bool ended = false;

 private:
  JsonReader reader_;
  FieldSet fields_ = [] {
    FieldSet f;
    f.add(FieldPath::parse(".v").value());
    return f;
  }();
  std::vector<JsonField> values_;
  uint64_t written_ = 0;
};

// One run of run_filter over files, with everything it needs.
struct Fixture {
  TempDir dir;
  std::string out_path = dir.file("out.ndjson");
  std::string dlq_path = dir.file("dlq.db");
  FakeClock clock{kNow};
  RecordingReporter reporter;
  std::atomic<bool> stop{false};
  FilterSettings settings;
  ValueStage stage;

  std::string input(std::string_view text, std::string_view name = "in.ndjson") {
    std::string p = dir.write(name, text);
    settings.input.inputs.push_back(p);
    return p;
  }

  Status run(std::string_view on_error, std::string dlq = "") {
    int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    Status s;
    {
      Output out(fd, "<stdout>");
      Io io{out, reporter, clock, &stop, "ktest", nullptr, false};
      auto bad =
          make_bad_input_handler(ErrorOptions{std::string(on_error), std::move(dlq)}, "ktest", io);
      REQUIRE(bad.ok());
      s = run_filter(stage, settings, **bad, io);
    }
    ::close(fd);
    return s;
  }

  std::string output() const { return test::read_file(out_path); }

  std::vector<std::string> dead_letters() const {
    OpenOptions o;
    o.read_only = true;
    o.create = false;
    auto db = Database::open(dlq_path, o);
    REQUIRE(db.ok());
    auto s = (*db)->prepare(
        "SELECT reason || ' | ' || CAST(payload AS TEXT) FROM dead_letters ORDER BY id");
    REQUIRE(s.ok());
    std::vector<std::string> out;
    while (*s->step()) out.emplace_back(s->column_text(0));
    return out;
  }
};

const char* kCheckpoint = R"({"$kpipe":"checkpoint","id":1,"at":0,"offsets":[]})";

}  // namespace

TEST_CASE("run_filter: data and control lines in order, empty lines skipped but counted",
          "[filter]") {
  Fixture fx;
  fx.input(std::string("{\"v\":1}\n\n") + kCheckpoint +
           "\n{\"v\":2}\r\n{\"$kpipe\":\"other\",\"x\":1}\n{\"v\":\"x\"}");
  REQUIRE(fx.run("fail").ok());
  CHECK(fx.output() ==
        std::string("1\n") + kCheckpoint + "\n2\n{\"$kpipe\":\"other\",\"x\":1}\n\"x\"\nEND\n");
  CHECK(fx.stage.seen == std::vector<uint64_t>{1, 4, 6});
  CHECK(fx.stage.controls ==
        std::vector<std::string>{kCheckpoint, "{\"$kpipe\":\"other\",\"x\":1}"});
  CHECK(fx.stage.ended);
  CHECK(fx.reporter.warnings.empty());
  CHECK(fx.reporter.stats_lines.empty());
}

TEST_CASE("run_filter: lines of blanks only are skipped like empty lines", "[filter]") {
  Fixture fx;
  fx.input("{\"v\":1}\n   \n\t \n{\"v\":2}\n");
  REQUIRE(fx.run("fail").ok());
  CHECK(fx.output() == "1\n2\nEND\n");
  CHECK(fx.stage.seen == std::vector<uint64_t>{1, 4});
}

TEST_CASE("run_filter: output is flushed at every control line", "[filter]") {
  Fixture fx;
  fx.input(std::string("{\"v\":1}\n") + kCheckpoint + "\n{\"v\":2}\n");
  std::string at_second;
  fx.stage.before_each = [&](const Line& line) {
    if (line.number == 3) at_second = fx.output();
  };
  REQUIRE(fx.run("fail").ok());
  CHECK(at_second == std::string("1\n") + kCheckpoint + "\n");
}

TEST_CASE("run_filter --on-error fail: INPUT: line N: REASON, exit status 65", "[filter]") {
  Fixture fx;
  std::string path = fx.input("{\"v\":1}\n\n{\"w\":2}\n{\"v\":3}\n");
  Status s = fx.run("fail");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kDataError);
  CHECK(s.error().message == path + ": line 3: field '.v' is missing");
  CHECK(fx.stage.seen == std::vector<uint64_t>{1, 3});
  CHECK_FALSE(fx.stage.ended);
  CHECK(fx.output() == "1\n");
}

TEST_CASE("run_filter --on-error fail: the reason of a line that is not JSON", "[filter]") {
  Fixture fx;
  std::string path = fx.input("{\"v\":1}\n{\"v\":\n");
  Status s = fx.run("fail");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kDataError);
  CHECK(s.error().message.starts_with(path + ": line 2: not valid JSON: "));
}

TEST_CASE("run_filter: a line longer than --max-line-bytes is bad input", "[filter]") {
  Fixture fx;
  fx.settings.input.max_line_bytes = 20;
  std::string long_line = "{\"v\":\"" + std::string(30, 'x') + "\"}";
  std::string path = fx.input("{\"v\":1}\n" + long_line + "\n{\"v\":3}\n");
  SECTION("fail") {
    Status s = fx.run("fail");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().status == ExitStatus::kDataError);
    CHECK(s.error().message == path + ": line 2: line is longer than 20 bytes (--max-line-bytes)");
    CHECK(fx.stage.seen == std::vector<uint64_t>{1});  // never handed to the stage
  }
  SECTION("dlq keeps it whole") {
    REQUIRE(fx.run("dlq", fx.dlq_path).ok());
    CHECK(fx.output() == "1\n3\nEND\n");
    CHECK(fx.dead_letters() ==
          std::vector<std::string>{"line 2: line is longer than 20 bytes (--max-line-bytes) | " +
                                   long_line});
  }
}

TEST_CASE("run_filter --on-error skip: goes on, counts, says so at the end", "[filter]") {
  Fixture fx;
  fx.settings.input.max_line_bytes = 30;
  fx.input("{\"v\":1}\nnope\n{\"w\":1}\n{\"v\":2}\n{\"v\":\"" + std::string(40, 'y') +
           "\"}\n{\"v\":3}\n");
  REQUIRE(fx.run("skip").ok());
  CHECK(fx.output() == "1\n2\n3\nEND\n");
  CHECK(fx.reporter.warnings == std::vector<std::string>{"skipped 3 bad lines"});
}

TEST_CASE("run_filter --on-error dlq: each bad line with its reason", "[filter]") {
  Fixture fx;
  fx.input("{\"v\":1}\n{\"w\":1}\nnot json\n{\"v\":2}\n");
  REQUIRE(fx.run("dlq", fx.dlq_path).ok());
  CHECK(fx.output() == "1\n2\nEND\n");
  auto letters = fx.dead_letters();
  REQUIRE(letters.size() == 2);
  CHECK(letters[0] == "line 2: field '.v' is missing | {\"w\":1}");
  CHECK(letters[1].starts_with("line 3: not valid JSON: "));
  CHECK(letters[1].ends_with(" | not json"));
  CHECK(fx.reporter.warnings ==
        std::vector<std::string>{"sent 2 lines to the dead-letter store " + fx.dlq_path});
}

TEST_CASE("run_filter: dead letters are durable before a control line passes", "[filter]") {
  Fixture fx;
  fx.input(std::string("{\"w\":1}\n") + kCheckpoint + "\n{\"v\":2}\n");
  std::vector<std::string> at_second;
  fx.stage.before_each = [&](const Line& line) {
    if (line.number == 3) at_second = fx.dead_letters();
  };
  REQUIRE(fx.run("dlq", fx.dlq_path).ok());
  CHECK(at_second == std::vector<std::string>{"line 1: field '.v' is missing | {\"w\":1}"});
}

TEST_CASE("run_filter: a failure that is not bad input stops, whatever --on-error says",
          "[filter]") {
  Fixture fx;
  fx.input("{\"v\":1}\n{\"v\":\"boom\"}\n{\"v\":3}\n");
  Status s = fx.run("skip");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kFailure);
  CHECK(s.error().message == "cannot write 'disk': on fire");
  CHECK(fx.stage.seen == std::vector<uint64_t>{1, 2});
}

TEST_CASE("run_filter: line numbers and names per input", "[filter]") {
  Fixture fx;
  fx.input("{\"v\":1}\n{\"v\":2}\n", "a.ndjson");
  std::string b = fx.input("{\"v\":3}\n{\"x\":4}\n", "b.ndjson");
  Status s = fx.run("fail");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message == b + ": line 2: field '.v' is missing");
  CHECK(fx.stage.seen == std::vector<uint64_t>{1, 2, 1, 2});
}

TEST_CASE("run_filter: the stop flag ends the run cleanly", "[filter]") {
  Fixture fx;
  fx.input("{\"v\":1}\n{\"v\":2}\n{\"v\":3}\n");
  fx.stage.before_each = [&](const Line& line) {
    if (line.number == 2) fx.stop = true;
  };
  REQUIRE(fx.run("fail").ok());
  CHECK(fx.stage.seen == std::vector<uint64_t>{1, 2});
  CHECK(fx.stage.ended);
  CHECK(fx.output() == "1\n2\nEND\n");
}

TEST_CASE("run_filter: a closed downstream ends the run quietly", "[filter]") {
  auto previous = std::signal(SIGPIPE, SIG_IGN);
  Fixture fx;
  std::string many;
  for (int i = 0; i < 20000; ++i) many += "{\"v\":" + std::to_string(i) + "}\n";
  fx.input(many);
  Pipe pipe;
  pipe.close_read();
  Status s;
  {
    Output out(pipe.write_end, "<stdout>", 64);
    Io io{out, fx.reporter, fx.clock, &fx.stop, "ktest", nullptr, false};
    BadInputHandler bad(OnError::kFail, nullptr, "ktest", fx.clock);
    s = run_filter(fx.stage, fx.settings, bad, io);
    CHECK(out.closed());
  }
  CHECK(s.ok());
  CHECK(fx.stage.seen.size() < 20000);
  CHECK_FALSE(fx.stage.ended);
  std::signal(SIGPIPE, previous);
}

TEST_CASE("run_filter: on_idle runs on a quiet input and its output is flushed", "[filter]") {
  Fixture fx;
  Pipe pipe;  // never written to, never closed
  TempDir::write_fd(pipe.write_end, "{\"v\":1}\n");
  fx.settings.input.inputs = {"/dev/fd/" + std::to_string(pipe.read_end)};
  fx.stage.idle_every = 1;
  int idles = 0;
  std::string seen_at_second_idle;
  fx.stage.idle = [&](Output& out) -> Status {
    // On a loaded machine the reader thread may not have read the line
    // before the first millisecond of quiet: count from the line on.
    if (fx.output().rfind("1\n", 0) != 0) return {};
    if (++idles == 2) {
      seen_at_second_idle = fx.output();
      fx.stop = true;
    }
    out.write_line("IDLE");
    return {};
  };
  REQUIRE(fx.run("fail").ok());
  CHECK(seen_at_second_idle == "1\nIDLE\n");
  CHECK(fx.output() == "1\nIDLE\nIDLE\nEND\n");
}

TEST_CASE("run_filter --stats: a final line with the counters", "[filter]") {
  Fixture fx;
  fx.settings.stats.interval = 1000;
  fx.input("{\"v\":1}\nbad\n\n{\"v\":2}\n" + std::string(kCheckpoint) + "\n");
  REQUIRE(fx.run("skip").ok());
  REQUIRE(fx.reporter.stats_lines.size() == 1);
  auto stats = parse_json(fx.reporter.stats_lines[0]);
  REQUIRE(stats.ok());
  CHECK(stats->find("program")->str == "ktest");
  CHECK(stats->find("in")->integer == 3);  // data lines, the bad one too
  CHECK(stats->find("out")->integer == 2);
  CHECK(stats->find("skipped")->integer == 1);
  CHECK(stats->find("dead_lettered")->integer == 0);
}

TEST_CASE("run_filter --stats: a slow input still gets a line every interval", "[filter]") {
  // Each record comes 400 ms after the program has handled the one before
  // and waits: with --stats 1s a line is due after the 3rd, 6th and 9th
  // record, however few records that is.
  Fixture fx;
  Pipe pipe;
  fx.settings.input.inputs = {"/dev/fd/" + std::to_string(pipe.read_end)};
  fx.settings.stats.interval = 1000;
  size_t sent = 1;
  TempDir::write_fd(pipe.write_end, "{\"v\":1}\n");
  fx.stage.waiting = [&] {
    if (fx.stage.seen.size() < sent || pipe.write_end < 0)
      return;  // not waiting for the next record yet
    fx.clock.advance(400);
    if (sent == 10) {
      pipe.close_write();
      return;
    }
    ++sent;
    TempDir::write_fd(pipe.write_end, "{\"v\":" + std::to_string(sent) + "}\n");
  };
  REQUIRE(fx.run("fail").ok());
  std::vector<int64_t> ins;
  for (const auto& line : fx.reporter.stats_lines)
    ins.push_back(parse_json(line)->find("in")->integer);
  CHECK(ins == std::vector<int64_t>{3, 6, 9, 10});
}

namespace {

// Writes each record one line late, as kdedup and kwindow do to hide a
// cache miss: the last one is written only in before_wait or on_end.
class HoldingStage final : public LineStage {
 public:
  Status on_line(const Line& line, Output& out) override {
    if (!held_.empty()) out.write_line(held_);
    held_.assign(line.text);
    return {};
  }
  Status before_wait(Output& out) override {
    if (!held_.empty()) out.write_line(held_);
    held_.clear();
    return {};
  }
  Status on_end(Output& out) override { return before_wait(out); }

 private:
  std::string held_;
};

}  // namespace

TEST_CASE("run_filter: an input that cannot be opened loses no line held from the inputs before it",
          "[filter]") {
  TempDir dir;
  std::string in = dir.write("in.ndjson", "{\"v\":1}\n{\"v\":2}\n{\"v\":3}\n");
  std::string out_path = dir.file("out.ndjson");
  FakeClock clock{kNow};
  RecordingReporter reporter;
  FilterSettings settings;
  settings.input.inputs = {in, dir.file("missing.ndjson")};
  HoldingStage stage;
  int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  Status s;
  {
    Output out(fd, "<stdout>");
    Io io{out, reporter, clock, nullptr, "ktest", nullptr, false};
    BadInputHandler bad(OnError::kFail, nullptr, "ktest", clock);
    s = run_filter(stage, settings, bad, io);
  }
  ::close(fd);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message.starts_with("cannot open '" + dir.file("missing.ndjson") + "'"));
  CHECK(test::read_file(out_path) == "{\"v\":1}\n{\"v\":2}\n{\"v\":3}\n");
}

TEST_CASE("run_filter: an input that is also an output is refused before anything is read",
          "[filter]") {
  Fixture fx;
  std::string in = fx.input("{\"v\":1}\n");
  SECTION("standard output appends to an input") {
    fx.settings.input.inputs.push_back(fx.out_path);
    // The fixture truncates its output: give it a line to read back.
    Status s = fx.run("fail");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().status == ExitStatus::kUsage);
    CHECK(s.error().message ==
          "input '" + fx.out_path +
              "' is also standard output: the program would read what it writes");
    CHECK(fx.stage.seen.empty());
  }
  SECTION("another output of the stage") {
    auto dups = Output::open_append(in);
    REQUIRE(dups.ok());
    fx.settings.outputs.emplace_back("the --dups file", dups->get());
    Status s = fx.run("fail");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message ==
          "input '" + in + "' is also the --dups file: the program would read what it writes");
  }
  SECTION("other files are fine") {
    auto other = Output::open_append(fx.dir.file("dups.ndjson"));
    REQUIRE(other.ok());
    fx.settings.outputs.emplace_back("the --dups file", other->get());
    REQUIRE(fx.run("fail").ok());
    CHECK(fx.output() == "1\nEND\n");
  }
}

TEST_CASE("stage_name and parse_stats", "[filter]") {
  CHECK(stage_name("kdedup", "") == "kdedup");
  CHECK(stage_name("kdedup", "kdedup") == "kdedup");
  CHECK(stage_name("kdedup", "eu") == "kdedup/eu");
  auto none = parse_stats(StatsOptions{"", ""}, "kdedup");
  REQUIRE(none.ok());
  CHECK(none->interval == 0);
  CHECK(none->write_metrics == nullptr);
  CHECK(none->stage == "kdedup");
  CHECK(parse_stats(StatsOptions{"1m", ""}, "k")->interval == 60000);
  auto zero = parse_stats(StatsOptions{"0s", ""}, "k");
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().status == ExitStatus::kUsage);
  CHECK(zero.error().message == "--stats: the interval must be positive");
  auto bare = parse_stats(StatsOptions{"5", ""}, "k");
  REQUIRE_FALSE(bare.ok());
  CHECK(bare.error().message.starts_with("--stats: "));
}

TEST_CASE("parse_stats: --metrics writes its file whole, in a folder that exists", "[filter]") {
  TempDir dir;
  std::string path = dir.file("kdedup.prom");
  auto settings = parse_stats(StatsOptions{"", path}, "kdedup");
  REQUIRE(settings.ok());
  REQUIRE(settings->write_metrics != nullptr);
  CHECK(settings->metrics == path);
  REQUIRE(settings->write_metrics("a 1\n").ok());
  REQUIRE(settings->write_metrics("b 2\n").ok());
  CHECK(test::read_file(path) == "b 2\n");
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  auto missing = parse_stats(StatsOptions{"", dir.file("no/such/k.prom")}, "k");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().status == ExitStatus::kUsage);
  CHECK(missing.error().message == fmt::format("--metrics '{}': no folder '{}'",
                                               dir.file("no/such/k.prom"), dir.file("no/such")));
}
