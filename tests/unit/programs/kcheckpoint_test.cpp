// kcheckpoint reset's arithmetic, and commit's delivery: through a pipe
// and through --each. The subcommands that need a broker run in
// integration/.
#include "kpipe/programs/kcheckpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <csignal>
#include <limits>
#include <set>
#include <sstream>
#include <thread>

#include "fakes.h"
#include "helpers.h"

using namespace kpipe;
using kpipe::test::Pipe;
using kpipe::test::TempDir;
using Kind = ResetSpec::Kind;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

}  // namespace

TEST_CASE("reset_target: each reset kind, clamped to the log", "[checkpoint]") {
  // The log holds offsets 100..249 (low 100, high 250), stored offset 180.
  CHECK(reset_target({Kind::kEarliest, 0}, 180, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kLatest, 0}, 180, 100, 250, 0) == 250);
  CHECK(reset_target({Kind::kTime, 0}, 180, 100, 250, 130) == 130);
  CHECK(reset_target({Kind::kTime, 0}, 180, 100, 250, 20) == 100);
  CHECK(reset_target({Kind::kOffset, 200}, 180, 100, 250, 0) == 200);
  CHECK(reset_target({Kind::kOffset, 7}, 180, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kOffset, 1000}, 180, 100, 250, 0) == 250);
  CHECK(reset_target({Kind::kShift, -30}, 180, 100, 250, 0) == 150);
  CHECK(reset_target({Kind::kShift, 30}, 180, 100, 250, 0) == 210);
  CHECK(reset_target({Kind::kShift, -500}, 180, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kShift, 500}, 180, 100, 250, 0) == 250);
}

TEST_CASE("reset_target: a shift without a stored offset starts from the log start",
          "[checkpoint]") {
  CHECK(reset_target({Kind::kShift, 10}, std::nullopt, 100, 250, 0) == 110);
  CHECK(reset_target({Kind::kShift, -10}, std::nullopt, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kEarliest, 0}, std::nullopt, 100, 250, 0) == 100);
}

TEST_CASE("reset_target: a stored offset outside the log is clamped too", "[checkpoint]") {
  CHECK(reset_target({Kind::kShift, 0}, 20, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kShift, 0}, 999, 100, 250, 0) == 250);
}

TEST_CASE("reset_target: a huge shift saturates instead of overflowing", "[checkpoint]") {
  CHECK(reset_target({Kind::kShift, kMax}, 180, 100, 250, 0) == 250);
  CHECK(reset_target({Kind::kShift, kMin}, 180, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kShift, kMax}, kMax, 100, 250, 0) == 250);
}

namespace {

std::string checkpoint_line(int64_t id, int64_t offset) {
  return "{\"$kpipe\":\"checkpoint\",\"id\":" + std::to_string(id) +
         ",\"at\":" + std::to_string(id) +
         ",\"offsets\":[{\"topic\":\"t\",\"partition\":0,\"offset\":" + std::to_string(offset) +
         "}]}\n";
}

// Lines 1..3, checkpoint 1 (offset 3), lines 4..5, checkpoint 2 (offset 5),
// and `tail` lines after it.
std::string two_checkpoints(int tail = 0) {
  std::string in;
  for (int n = 1; n <= 3; ++n) in += "{\"n\":" + std::to_string(n) + "}\n";
  in += checkpoint_line(1, 3);
  for (int n = 4; n <= 5; ++n) in += "{\"n\":" + std::to_string(n) + "}\n";
  in += checkpoint_line(2, 5);
  for (int n = 6; n < 6 + tail; ++n) in += "{\"n\":" + std::to_string(n) + "}\n";
  return in;
}

// Runs `kcheckpoint commit` over `input` with standard output on `out_fd`,
// with SIGPIPE ignored as kpipe's programs run (a closed pipe is EPIPE).
struct Commit {
  TempDir dir;
  FakeClock clock{1795946400000};
  RecordingReporter reporter;
  CheckpointOptions o;
  void (*previous)(int) = std::signal(SIGPIPE, SIG_IGN);

  Commit() { o.state = dir.file("s.db"); }
  ~Commit() { std::signal(SIGPIPE, previous); }

  Status run(const std::string& input, int out_fd) {
    o.input.inputs = {dir.write("in.ndjson", input)};
    Output out(out_fd);
    Io io{out, reporter, clock, nullptr, "kcheckpoint", nullptr, false};
    Status s = run_checkpoint_commit(o, io);
    (void)out.flush();
    return s;
  }
  Status run(const std::string& input) {
    int fd = ::open(dir.file("stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    Status s = run(input, fd);
    ::close(fd);
    return s;
  }

  std::optional<int64_t> latest_complete() {
    auto store = StateStore::open(o.state);
    REQUIRE(store.ok());
    auto latest = (*store)->latest_complete();
    REQUIRE(latest.ok());
    return *latest;
  }
  std::string read(const std::string& name) { return test::read_file(dir.file(name)); }
};

}  // namespace

TEST_CASE("commit --passthrough: a checkpoint whose lines sit unread in the pipe is not complete",
          "[checkpoint]") {
  // The reader takes two lines and dies: the restart must start before
  // the three lines of checkpoint 1, not after them.
  Commit c;
  c.o.passthrough = true;
  Pipe pipe;
  std::string got;
  std::thread reader([&] {
    char ch;
    int lines = 0;
    while (lines < 2 && ::read(pipe.read_end, &ch, 1) == 1) {
      got.push_back(ch);
      if (ch == '\n') ++lines;
    }
    pipe.close_read();
  });
  Status s = c.run(two_checkpoints(), pipe.write_end);
  reader.join();
  REQUIRE(s.ok());
  CHECK(got == "{\"n\":1}\n{\"n\":2}\n");
  CHECK_FALSE(c.latest_complete().has_value());
}

TEST_CASE("commit --passthrough: each checkpoint completes once the reader has read its lines",
          "[checkpoint]") {
  Commit c;
  c.o.passthrough = true;
  Pipe pipe;
  std::string got;
  std::thread reader([&] { got = test::read_file("/dev/fd/" + std::to_string(pipe.read_end)); });
  Status s = c.run(two_checkpoints(), pipe.write_end);
  pipe.close_write();
  reader.join();
  REQUIRE(s.ok());
  CHECK(got == "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n{\"n\":5}\n");
  CHECK(c.latest_complete() == 2);
  CHECK(c.reporter.infos.back() == "completed 2 checkpoints");
}

TEST_CASE("commit --each: the checkpoint completes when COMMAND exits 0, with its lines on stdin",
          "[checkpoint]") {
  Commit c;
  c.o.each = "cat >> " + c.dir.file("got") + "; echo run >> " + c.dir.file("runs");
  REQUIRE(c.run(two_checkpoints()).ok());
  CHECK(c.read("got") == "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n{\"n\":5}\n");
  CHECK(c.read("runs") == "run\nrun\n");  // once per checkpoint
  CHECK(c.latest_complete() == 2);
  CHECK(c.read("stdout").empty());
  CHECK(c.reporter.warnings.empty());
}

TEST_CASE("commit --each: a failing COMMAND leaves its checkpoint incomplete and is an error",
          "[checkpoint]") {
  Commit c;
  // Checkpoint 1's batch is loaded; checkpoint 2's fails.
  c.o.each = "n=$(wc -l); [ \"$n\" -eq 3 ] || exit 3";
  Status s = c.run(two_checkpoints());
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kFailure);
  CHECK(s.error().message ==
        "command '" + c.o.each + "' exited with status 3: checkpoint 2 is not complete");
  CHECK(c.latest_complete() == 1);

  Commit killed;
  killed.o.each = "kill -9 $$";
  s = killed.run(two_checkpoints());
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        "command 'kill -9 $$' was killed by signal 9: checkpoint 1 is not complete");
  CHECK_FALSE(killed.latest_complete().has_value());
}

TEST_CASE("commit --each: a COMMAND that leaves input unread does not complete the checkpoint",
          "[checkpoint]") {
  Commit c;
  c.o.each = "read -r line";  // the shell's read takes one line, no more
  Status s = c.run(two_checkpoints());
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        "command 'read -r line' exited with status 0 without reading all its "
        "input: checkpoint 1 is not complete");
  CHECK_FALSE(c.latest_complete().has_value());
}

TEST_CASE("commit --each: lines after the last checkpoint never reach the end of COMMAND's input",
          "[checkpoint]") {
  Commit c;
  // A batch is kept only once its input ended: the lines after checkpoint
  // 2 belong to no checkpoint and must not be kept.
  c.o.each =
      "cat > " + c.dir.file("part") + " && cat " + c.dir.file("part") + " >> " + c.dir.file("kept");
  REQUIRE(c.run(two_checkpoints(2)).ok());
  CHECK(c.read("kept") == "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n{\"n\":5}\n");
  CHECK(c.latest_complete() == 2);
  REQUIRE(c.reporter.warnings.size() == 1);
  CHECK(c.reporter.warnings[0] == "2 lines after checkpoint 2 came without a checkpoint: '" +
                                      c.o.each +
                                      "' was stopped before the end of its input, and the next "
                                      "run reads them again");
}

TEST_CASE("commit --each: COMMAND sees none of kcheckpoint's descriptors and gets SIGPIPE back",
          "[checkpoint]") {
  // What this process holds without close-on-exec (from whoever started
  // the tests) is not kcheckpoint's: COMMAND may inherit only those.
  std::set<std::string> allowed = {"0", "1", "2"};
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) {
      int fd = std::atoi(e->d_name);
      if (e->d_name[0] == '.' || fd == ::dirfd(d)) continue;
      int flags = ::fcntl(fd, F_GETFD);
      if (flags >= 0 && (flags & FD_CLOEXEC) == 0) allowed.insert(e->d_name);
    }
    ::closedir(d);
  }
  Commit c;
  // `ls` runs as a child of the shell and lists the shell's descriptors.
  // Their output goes to COMMAND's standard output, kcheckpoint's: a
  // redirection would add the shell's saved copy of it to the list.
  c.o.each = "cat >/dev/null; ls /proc/$$/fd; grep SigIgn /proc/$$/status; :";
  Status s = c.run(checkpoint_line(7, 1).insert(0, "{}\n"));
  REQUIRE(s.ok());
  CHECK(c.latest_complete() == 7);
  std::istringstream lines(c.read("stdout"));
  std::string word;
  int seen = 0;
  while (lines >> word && word != "SigIgn:") {
    INFO("descriptor " << word);
    CHECK(allowed.count(word) == 1);
    ++seen;
  }
  CHECK(seen >= 3);
  // SigIgn is a hexadecimal mask; SIGPIPE (13) is bit 12.
  REQUIRE(word == "SigIgn:");
  REQUIRE(lines >> word);
  unsigned long long mask = std::stoull(word, nullptr, 16);
  CHECK((mask & (1ull << (SIGPIPE - 1))) == 0);
}

TEST_CASE("commit --each and --passthrough cannot be combined", "[checkpoint]") {
  Commit c;
  c.o.each = "cat";
  c.o.passthrough = true;
  Status s = c.run(two_checkpoints());
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kUsage);
  CHECK(s.error().message ==
        "--each and --passthrough cannot be combined: the lines go to COMMAND");
}
