#include "kpipe/programs/kdlq.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "fakes.h"
#include "guard_fixtures.h"
#include "kpipe/guard.h"
#include "kpipe/store/dlq_store.h"

namespace kpipe {
namespace {

using namespace std::string_literals;

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kpipe-kdlq-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs one kdlq entry point with stdout in a file; returns what it wrote.
struct Run {
  explicit Run(TempDir& d) : dir(d) {}
  TempDir& dir;
  FakeClock clock{1795946400010};  // 2026-11-29T10:00:00.010Z
  RecordingReporter reporter;
  bool interactive = false;  // standard output a terminal

  std::pair<Status, std::string> operator()(Status (*fn)(const DlqOptions&, Io&),
                                            const DlqOptions& o) {
    std::string path = dir.file("stdout");
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    Status s;
    {
      Output out(fd);
      Io io{out, reporter, clock, nullptr, "kdlq", nullptr, interactive};
      s = fn(o, io);
      (void)out.flush();
    }
    ::close(fd);
    return {s, read_file(path)};
  }
};

// A store with three entries: two from kdedup (one from an envelope), one from kwindow.
std::string make_store(TempDir& dir) {
  std::string path = dir.file("bad.db");
  auto store = DlqStore::open(path);
  REQUIRE(store.ok());
  std::vector<DeadLetter> letters(3);
  std::vector<std::string> payloads = {
      "{\"a\":", "{\"topic\":\"events\",\"partition\":1,\"offset\":7,\"value\":1}", "bin\xff\0"s};
  const char* stages[] = {"kdedup", "kdedup/orders", "kwindow"};
  const char* reasons[] = {"line 1: not valid JSON: truncated object or array",
                           "line 2: field '.value.ts' is missing",
                           "line 3: not valid JSON: invalid UTF-8"};
  for (size_t i = 0; i < 3; ++i) {
    letters[i].at = 1795946400010 - static_cast<Millis>(3 - i) * kHour;
    letters[i].stage = stages[i];
    letters[i].reason = reasons[i];
    letters[i].input = "<stdin>";
    letters[i].line = i + 1;
    letters[i].payload = payloads[i];
  }
  letters[1].source = SourcePosition{"events", 1, 7};
  REQUIRE((*store)->add(letters).ok());
  return path;
}

TEST_CASE("kdlq list: a table on a terminal, else NDJSON, with filters and a limit", "[dlq_tool]") {
  TempDir dir;
  Run run(dir);
  DlqOptions o;
  o.dlq = make_store(dir);
  auto [s, out] = run(run_dlq_list, o);
  REQUIRE(s.ok());
  CHECK(out.starts_with("{\"id\":1,"));
  run.interactive = true;
  std::tie(s, out) = run(run_dlq_list, o);
  REQUIRE(s.ok());
  // clang-format off
  CHECK(out ==
        "ID  AT                        STAGE          SOURCE       REPLAYED  REASON                                             PAYLOAD\n"
        " 1  2026-11-29T07:00:00.010Z  kdedup         -                   -  line 1: not valid JSON: truncated object or array  {\"a\":\n"
        " 2  2026-11-29T08:00:00.010Z  kdedup/orders  events[1]@7         -  line 2: field '.value.ts' is missing               {\"topic\":\"events\",\"partition\":1,\"offset\":7,\"value\":1}\n"
        " 3  2026-11-29T09:00:00.010Z  kwindow        -                   -  line 3: not valid JSON: invalid UTF-8              bin\\xff\\x00\n");
  // clang-format on

  o.format = "ndjson";
  o.stage = "kdedup";
  o.limit = 1;
  std::tie(s, out) = run(run_dlq_list, o);
  REQUIRE(s.ok());
  CHECK(out ==
        "{\"id\":1,\"at\":\"2026-11-29T07:00:00.010Z\",\"stage\":\"kdedup\",\"reason\":\"line 1: "
        "not valid JSON: "
        "truncated object or "
        "array\",\"input\":\"<stdin>\",\"line\":1,\"source_topic\":null,\"source_partition\":null,"
        "\"source_offset\":null,\"failures\":1,\"replayed\":false,\"replayed_at\":null,\"payload\":"
        "\"{\\\"a\\\":\"}\n");

  o.limit = 0;
  o.stage.clear();
  o.since = "-2h";  // relative to the clock: 08:00:00.010 and later
  std::tie(s, out) = run(run_dlq_list, o);
  REQUIRE(s.ok());
  CHECK(out.find("\"id\":1,") == std::string::npos);
  CHECK(out.find("\"id\":2,") != std::string::npos);
  CHECK(out.find("\"payload_base64\":\"YmluXwA=\"") == std::string::npos);
  CHECK(out.find("\"payload_base64\":\"YmluwAA=\"") == std::string::npos);
  CHECK(out.find("\"payload_base64\":\"Ymlu/wA=\"") != std::string::npos);

  o.since = "yesterday";
  std::tie(s, out) = run(run_dlq_list, o);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kUsage);
  CHECK(s.error().message.starts_with("--since: 'yesterday' is not a time"));

  o.since.clear();
  o.format = "json";
  std::tie(s, out) = run(run_dlq_list, o);
  CHECK(s.error().message == "unknown --format 'json', did you mean 'ndjson'?");
}

TEST_CASE("kdlq stats counts by reason, stage, topic and hour", "[dlq_tool]") {
  TempDir dir;
  Run run(dir);
  DlqOptions o;
  o.dlq = make_store(dir);
  o.by = "stage";
  o.format = "table";
  auto [s, out] = run(run_dlq_stats, o);
  REQUIRE(s.ok());
  CHECK(out ==
        "STAGE          COUNT  PENDING  FIRST                     LAST\n"
        "kdedup             1        1  2026-11-29T07:00:00.010Z  2026-11-29T07:00:00.010Z\n"
        "kdedup/orders      1        1  2026-11-29T08:00:00.010Z  2026-11-29T08:00:00.010Z\n"
        "kwindow            1        1  2026-11-29T09:00:00.010Z  2026-11-29T09:00:00.010Z\n"
        "total              3        3\n");
  o.by = "topic";
  o.format = "ndjson";
  std::tie(s, out) = run(run_dlq_stats, o);
  REQUIRE(s.ok());
  CHECK(out ==
        "{\"topic\":null,\"count\":2,\"pending\":2,\"first\":\"2026-11-29T07:00:00.010Z\","
        "\"last\":\"2026-11-29T09:00:00.010Z\"}\n"
        "{\"topic\":\"events\",\"count\":1,\"pending\":1,\"first\":\"2026-11-29T08:00:00.010Z\","
        "\"last\":\"2026-11-29T08:00:00.010Z\"}\n");
}

TEST_CASE("kdlq replay writes the original lines, marks them, and --again sends them once more",
          "[dlq_tool]") {
  TempDir dir;
  Run run(dir);
  DlqOptions o;
  o.dlq = make_store(dir);
  const std::string all =
      "{\"a\":\n{\"topic\":\"events\",\"partition\":1,\"offset\":7,\"value\":1}\nbin\xff\0\n"s;

  o.dry_run = true;
  o.format = "ndjson";
  auto [s, out] = run(run_dlq_replay, o);
  REQUIRE(s.ok());
  CHECK(std::count(out.begin(), out.end(), '\n') == 3);
  CHECK(out.find("\"replayed\":false") != std::string::npos);

  o.dry_run = false;
  std::tie(s, out) = run(run_dlq_replay, o);
  REQUIRE(s.ok());
  CHECK(out == all);
  CHECK(run.reporter.infos.back() == "replayed 3 entries to <stdout>");

  std::tie(s, out) = run(run_dlq_replay, o);
  REQUIRE(s.ok());
  CHECK(out.empty());

  o.dry_run = true;
  std::tie(s, out) = run(run_dlq_replay, o);
  CHECK(out.empty());
  o.again = true;
  std::tie(s, out) = run(run_dlq_replay, o);
  CHECK(std::count(out.begin(), out.end(), '\n') == 3);
  CHECK(out.find("\"replayed\":true") != std::string::npos);

  o.dry_run = false;
  o.reason = "invalid UTF-8";
  std::tie(s, out) = run(run_dlq_replay, o);
  REQUIRE(s.ok());
  CHECK(out == "bin\xff\0\n"s);

  DlqOptions list;
  list.dlq = o.dlq;
  list.format = "ndjson";
  std::tie(s, out) = run(run_dlq_list, list);
  CHECK(out.find("\"replayed_at\":\"2026-11-29T10:00:00.010Z\"") != std::string::npos);
}

TEST_CASE("kdlq replay refuses what it cannot do", "[dlq_tool]") {
  TempDir dir;
  Run run(dir);
  DlqOptions o;
  o.dlq = make_store(dir);
  o.to = "events";
  auto [s, out] = run(run_dlq_replay, o);
  CHECK(s.error().status == ExitStatus::kUsage);
  CHECK(s.error().message ==
        "--to 'events': expected kafka:TOPIC or kinesis:STREAM (without --to, entries go to "
        "standard output)");

  o.to = "kinesis:bad name";
  std::tie(s, out) = run(run_dlq_replay, o);
  CHECK(s.error().status == ExitStatus::kUsage);
  CHECK(s.error().message ==
        "'kinesis:bad name': a Kinesis stream's name is 1 to 128 letters, digits, '_', '.' and "
        "'-'");
  // A Kinesis dead-letter stream replays into any stream but itself.
  o.to = "kinesis:events";
  o.dlq = "kinesis:events";
  std::tie(s, out) = run(run_dlq_replay, o);
  CHECK(s.error().status == ExitStatus::kUsage);
  CHECK(s.error().message == "--to 'kinesis:events' is the dead-letter stream itself");

  o.to.clear();
  o.dlq = "kafka:dlq";
  o.reason = "late";
  std::tie(s, out) = run(run_dlq_replay, o);
  CHECK(s.error().status == ExitStatus::kUsage);
  CHECK(s.error().message.starts_with(
      "a filtered replay of a Kafka dead-letter topic needs its own --group"));

  o.reason.clear();
  std::tie(s, out) = run(run_dlq_replay, o);
  CHECK(s.error().status == ExitStatus::kUsage);
  CHECK(s.error().message ==
        "--dlq 'kafka:dlq' needs brokers: no brokers given: use -b HOST:PORT or set KPIPE_BROKERS");

  o.dlq = dir.file("missing.db");
  std::tie(s, out) = run(run_dlq_replay, o);
  CHECK(s.error().status == ExitStatus::kFailure);
  CHECK(s.error().message == "dead-letter store '" + o.dlq + "' does not exist");

  o.dlq = make_store(dir);
  o.group = "g";
  std::tie(s, out) = run(run_dlq_list, o);
  CHECK(s.error().message == "--group is for a Kafka dead-letter topic, not '" + o.dlq + "'");
}

TEST_CASE("kdlq purge: replayed, older than, both; a dry run first", "[dlq_tool]") {
  TempDir dir;
  Run run(dir);
  DlqOptions o;
  o.dlq = make_store(dir);
  auto [s, out] = run(run_dlq_purge, o);
  CHECK(s.error().status == ExitStatus::kUsage);
  CHECK(s.error().message ==
        "say what to purge: --replayed, --older-than D, or both (entries that are both)");

  o.older_than = "150m";  // before 07:30: the first entry
  o.dry_run = true;
  std::tie(s, out) = run(run_dlq_purge, o);
  REQUIRE(s.ok());
  CHECK(out == "would purge 1 entry from " + o.dlq + "\n");
  o.dry_run = false;
  std::tie(s, out) = run(run_dlq_purge, o);
  CHECK(out == "purged 1 entry from " + o.dlq + "\n");
  std::tie(s, out) = run(run_dlq_purge, o);
  CHECK(out == "purged 0 entries from " + o.dlq + "\n");

  o.older_than = "5";
  std::tie(s, out) = run(run_dlq_purge, o);
  CHECK(s.error().status == ExitStatus::kUsage);
  CHECK(s.error().message.starts_with("--older-than: "));
}

TEST_CASE("kdlq guard sends bad lines to --dlq by default, and fails without it", "[dlq_tool]") {
  TempDir dir;
  Run run(dir);
  std::string input = dir.file("in.ndjson");
  {
    std::ofstream f(input, std::ios::binary);
    f << "{\"id\":\"a\",\"ts\":1}\n{\"id\":1,\"ts\":1}\n{\"ts\":2}\n{\"id\":\"b\",\"ts\":\"2026-11-"
         "29T10:00:00Z\"}\n";
  }
  DlqOptions o;
  o.require = {".id:string", ".ts:time"};
  o.input.inputs = {input};
  auto [s, out] = run(run_dlq_guard, o);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kDataError);
  CHECK(s.error().message == input + ": line 2: field '.id' is a number, not a string");
  CHECK(out == "{\"id\":\"a\",\"ts\":1}\n");

  o.errors.dlq = dir.file("bad.db");
  o.name = "door";
  std::tie(s, out) = run(run_dlq_guard, o);
  REQUIRE(s.ok());
  CHECK(out == "{\"id\":\"a\",\"ts\":1}\n{\"id\":\"b\",\"ts\":\"2026-11-29T10:00:00Z\"}\n");
  CHECK(run.reporter.warnings.back() == "sent 2 lines to the dead-letter store " + o.errors.dlq);
  DlqOptions list;
  list.dlq = o.errors.dlq;
  list.format = "ndjson";
  std::tie(s, out) = run(run_dlq_list, list);
  CHECK(out.find("\"stage\":\"kdlq-guard/door\",\"reason\":\"line 2: field '.id' is a number, not "
                 "a string\"") != std::string::npos);
  CHECK(out.find("\"reason\":\"line 3: field '.id' is missing\"") != std::string::npos);

  o.on_error_given = true;
  o.errors.on_error = "skip";
  std::tie(s, out) = run(run_dlq_guard, o);
  REQUIRE(s.ok());
  CHECK(run.reporter.warnings.back() == "skipped 2 bad lines");

  o.require = {".id:strng"};
  std::tie(s, out) = run(run_dlq_guard, o);
  CHECK(s.error().message == "--require '.id:strng': unknown type 'strng', did you mean 'string'?");
}

using test::requirements;

TEST_CASE("a guard writes good lines exactly as read and refuses bad ones without writing",
          "[guard]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  {
    Output out(fds[1]);
    GuardStage stage(requirements({".a:integer"}));
    std::string good = "{ \"a\" : 1 ,\"b\":\"\xc3\xa9\"}  ";
    std::string bad = R"({"a":"1"})";
    for (const std::string& text : {good, bad}) {
      std::string padded = text + std::string(kJsonPadding, '\0');
      Line line;
      line.text = std::string_view(padded.data(), text.size());
      line.number = 1;
      Status s = stage.on_line(line, out);
      CHECK(s.ok() == (text == good));
    }
    REQUIRE(out.flush().ok());
    Counters c;
    stage.fill_counters(c);
    CHECK(c.out == 1);
  }
  char buf[256];
  ssize_t n = ::read(fds[0], buf, sizeof buf);
  ::close(fds[0]);
  ::close(fds[1]);
  CHECK(std::string(buf, static_cast<size_t>(n)) == "{ \"a\" : 1 ,\"b\":\"\xc3\xa9\"}  \n");
}

TEST_CASE("kdlq replay to a pipe marks only the entries whose lines the reader read",
          "[dlq_tool]") {
  // The reader takes two lines, asking for many bytes at a time as head
  // does, and dies: the third entry stays pending, whatever the pipe held.
  auto previous = std::signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  Run run(dir);
  DlqOptions o;
  o.dlq = make_store(dir);
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    while (std::count(got.begin(), got.end(), '\n') < 2) {
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
  });
  Status s;
  {
    Output out(fds[1]);
    Io io{out, run.reporter, run.clock, nullptr, "kdlq", nullptr, false};
    s = run_dlq_replay(o, io);
  }
  reader.join();
  ::close(fds[1]);
  std::signal(SIGPIPE, previous);
  REQUIRE(s.ok());
  CHECK(got == "{\"a\":\n{\"topic\":\"events\",\"partition\":1,\"offset\":7,\"value\":1}\n");
  CHECK(run.reporter.infos.back() == "replayed 2 entries to <stdout>");

  // The next replay sends the one the reader never got.
  auto [again, out] = run(run_dlq_replay, o);
  REQUIRE(again.ok());
  CHECK(out == "bin\xff\0\n"s);
}

}  // namespace
}  // namespace kpipe
