#include "kpipe/stage/line_feed.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <vector>

#include "helpers.h"

using namespace kpipe;
using kpipe::test::Pipe;
using kpipe::test::TempDir;

namespace {

struct Got {
  std::string text;
  uint64_t number = 0;
  std::string input;
  bool too_long = false;
  bool parsed = false;
  std::string error;              // the parse's, if any
  std::vector<std::string> strs;  // per slot: the string read, "-" when none
  JsonType root = JsonType::kMissing;
};

Got copy(const Line& line, const ParsedLine* parsed, size_t slots) {
  Got g;
  g.text = line.text;
  g.number = line.number;
  g.input = line.input;
  g.too_long = line.too_long;
  if (parsed == nullptr) return g;
  g.parsed = true;
  g.root = parsed->root_type;
  if (!parsed->status.ok()) {
    g.error = parsed->status.error().message;
    return g;
  }
  for (size_t i = 0; i < slots; ++i) {
    const JsonField& f = parsed->values[i];
    g.strs.push_back(f.type == JsonType::kString   ? std::string(f.str)
                     : f.type == JsonType::kNumber ? std::string(f.raw)
                                                   : "-");
  }
  return g;
}

std::vector<Got> drain(LineFeed& feed, size_t slots = 0) {
  std::vector<Got> out;
  Line line;
  const ParsedLine* parsed = nullptr;
  for (;;) {
    auto more = feed.next(line, parsed);
    REQUIRE(more.ok());
    if (!*more) break;
    out.push_back(copy(line, parsed, slots));
  }
  return out;
}

FieldSet fields_of(std::initializer_list<const char*> paths) {
  FieldSet set;
  for (const char* p : paths) set.add(*FieldPath::parse(p));
  return set;
}

}  // namespace

TEST_CASE("LineFeed: many chunks of lines come out in order, each parsed as JsonReader reads it",
          "[line_feed]") {
  // About 6 MiB: a dozen chunks, so that both threads parse and the
  // queue fills and drains.
  std::string bytes;
  const int n = 60000;
  for (int i = 0; i < n; ++i)
    bytes += fmt::format(R"({{"id":{},"user":"u\"{}","pad":"{}"}})", i, i % 97,
                         std::string(i % 150, 'x')) +
             "\n";
  TempDir dir;
  FieldSet fields = fields_of({".id", ".user"});
  LineFeed feed({dir.write("in", bytes)}, kDefaultMaxLineBytes, &fields);
  auto got = drain(feed, 2);
  REQUIRE(got.size() == static_cast<size_t>(n));
  JsonReader reader;
  std::vector<JsonField> want;
  for (int i = 0; i < n; ++i) {
    const Got& g = got[static_cast<size_t>(i)];
    REQUIRE(g.number == static_cast<uint64_t>(i + 1));
    REQUIRE(g.parsed);
    REQUIRE(g.error.empty());
    REQUIRE(g.root == JsonType::kObject);
    // The escaped string was unescaped into a parser's buffer: the feed
    // keeps a copy that outlives the next line.
    REQUIRE(g.strs == std::vector<std::string>{std::to_string(i), fmt::format("u\"{}", i % 97)});
  }
  CHECK(got[0].input == dir.path() + "/in");
}

TEST_CASE(
    "LineFeed: blank, control and too-long lines are lines, not parsed; a bad line has its reason",
    "[line_feed]") {
  TempDir dir;
  FieldSet fields = fields_of({".a"});
  std::string longer(40, 'x');
  LineFeed feed(
      {dir.write("in", "{\"a\":1}\r\n\n  \n{\"$kpipe\":\"checkpoint\",\"id\":1}\n{\"a\":\n\"" +
                           longer + "\"\n{\"a\":\"last\"}")},
      32, &fields);
  auto got = drain(feed, 1);
  REQUIRE(got.size() == 7);
  CHECK(got[0].text == "{\"a\":1}");  // CRLF loses its CR
  CHECK(got[0].strs == std::vector<std::string>{"1"});
  CHECK((got[1].text.empty() && !got[1].parsed && got[1].number == 2));
  CHECK((got[2].text == "  " && !got[2].parsed));
  CHECK_FALSE(got[3].parsed);  // the control line
  CHECK(got[4].parsed);
  CHECK(got[4].error.find("not valid JSON") == 0);
  CHECK((got[5].too_long && !got[5].parsed && got[5].text.size() == 42));
  // A last line without its newline.
  CHECK(got[6].text == "{\"a\":\"last\"}");
  CHECK(got[6].strs == std::vector<std::string>{"last"});
  CHECK(got[6].number == 7);
}

TEST_CASE("LineFeed: a line longer than a chunk is read whole", "[line_feed]") {
  TempDir dir;
  std::string big = "{\"a\":\"" + std::string(3u << 20, 'y') + "\"}";
  FieldSet fields = fields_of({".a"});
  LineFeed feed({dir.write("in", "{\"a\":\"x\"}\n" + big + "\n{\"a\":\"z\"}\n")},
                kDefaultMaxLineBytes, &fields);
  auto got = drain(feed, 1);
  REQUIRE(got.size() == 3);
  CHECK(got[1].text == big);
  CHECK(got[1].strs[0].size() == (3u << 20));
  CHECK(got[2].strs == std::vector<std::string>{"z"});
}

TEST_CASE(
    "LineFeed: inputs in order, numbered each from 1, named; without fields nothing is parsed",
    "[line_feed]") {
  TempDir dir;
  std::string a = dir.write("a", "a1\na2\n");
  std::string b =
      dir.write("b", "b1");  // no final newline: still a line, and not joined to the next
  std::string c = dir.write("c", "c1\n");
  LineFeed feed({a, b, c}, kDefaultMaxLineBytes, nullptr);
  auto got = drain(feed);
  REQUIRE(got.size() == 4);
  CHECK((got[0].text == "a1" && got[0].number == 1 && got[0].input == a));
  CHECK((got[1].text == "a2" && got[1].number == 2));
  CHECK((got[2].text == "b1" && got[2].number == 1 && got[2].input == b));
  CHECK((got[3].text == "c1" && got[3].number == 1 && got[3].input == c));
  for (const Got& g : got) CHECK_FALSE(g.parsed);
}

TEST_CASE("LineFeed: a missing input is an error after the lines of those before it",
          "[line_feed]") {
  TempDir dir;
  std::string a = dir.write("a", "one\ntwo\n");
  LineFeed feed({a, dir.path() + "/missing"}, kDefaultMaxLineBytes, nullptr);
  Line line;
  const ParsedLine* parsed = nullptr;
  REQUIRE(*feed.next(line, parsed));
  REQUIRE(*feed.next(line, parsed));
  CHECK(line.text == "two");
  auto more = feed.next(line, parsed);
  REQUIRE_FALSE(more.ok());
  CHECK(more.error().message ==
        "cannot open '" + dir.path() + "/missing': No such file or directory");
}

TEST_CASE(
    "LineFeed: before_wait runs before waiting on a quiet pipe, and lines that arrive later are "
    "read",
    "[line_feed]") {
  Pipe pipe;
  LineFeed feed({"/dev/fd/" + std::to_string(pipe.read_end)}, kDefaultMaxLineBytes, nullptr);
  std::atomic<int> waits{0};
  feed.set_before_wait([&] { ++waits; });
  int idle = 0;
  feed.set_idle_hook(1, [&]() -> Status {
    // Input comes only once the program has waited.
    if (++idle == 2) {
      TempDir::write_fd(pipe.write_end, "late\n");
      pipe.close_write();
    }
    return {};
  });
  Line line;
  const ParsedLine* parsed = nullptr;
  REQUIRE(*feed.next(line, parsed));
  CHECK(line.text == "late");
  CHECK(waits >= 1);
  CHECK(idle >= 2);
  CHECK_FALSE(*feed.next(line, parsed));
}

TEST_CASE("LineFeed: the stop check ends a wait; an idle hook's error is next's", "[line_feed]") {
  Pipe pipe;  // the write end stays open: without a stop, next() would wait forever
  std::string path = "/dev/fd/" + std::to_string(pipe.read_end);
  SECTION("stop") {
    LineFeed feed({path}, kDefaultMaxLineBytes, nullptr);
    std::atomic<bool> stop{false};
    feed.set_stop_check([&] { return stop.load(); });
    int idle = 0;
    feed.set_idle_hook(1, [&]() -> Status {
      if (++idle == 3) stop = true;
      return {};
    });
    Line line;
    const ParsedLine* parsed = nullptr;
    auto more = feed.next(line, parsed);
    REQUIRE(more.ok());
    CHECK_FALSE(*more);
    CHECK(idle == 3);
  }
  SECTION("error") {
    LineFeed feed({path}, kDefaultMaxLineBytes, nullptr);
    feed.set_idle_hook(1, [&]() -> Status { return failure("deadline missed for 'x'"); });
    Line line;
    const ParsedLine* parsed = nullptr;
    auto more = feed.next(line, parsed);
    REQUIRE_FALSE(more.ok());
    CHECK(more.error().message == "deadline missed for 'x'");
  }
}

TEST_CASE("LineFeed: a stop does not turn half a line into a line", "[line_feed]") {
  Pipe pipe;
  LineFeed feed({"/dev/fd/" + std::to_string(pipe.read_end)}, kDefaultMaxLineBytes, nullptr);
  std::atomic<bool> stop{false};
  feed.set_stop_check([&] { return stop.load(); });
  bool first = false;
  // The wait after the whole line: the rest of the next one may never come.
  feed.set_before_wait([&] {
    if (first) stop = true;
  });
  TempDir::write_fd(pipe.write_end, "{\"a\":1}\n{\"b\":");
  Line line;
  const ParsedLine* parsed = nullptr;
  REQUIRE(*feed.next(line, parsed));
  CHECK(line.text == "{\"a\":1}");
  first = true;
  auto more = feed.next(line, parsed);
  REQUIRE(more.ok());
  CHECK_FALSE(*more);
}

TEST_CASE("LineFeed: a named FIFO with no writer yet is waited for, not taken for empty",
          "[line_feed]") {
  TempDir dir;
  std::string fifo = dir.path() + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  LineFeed feed({fifo}, kDefaultMaxLineBytes, nullptr);
  int idle = 0;
  bool written = false;
  feed.set_idle_hook(1, [&]() -> Status {
    // A writer can open the FIFO once the feed has it open for reading.
    if (++idle < 3 || written) return {};
    int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer < 0) return {};
    TempDir::write_fd(writer, "hello\n");
    ::close(writer);
    written = true;
    return {};
  });
  Line line;
  const ParsedLine* parsed = nullptr;
  auto more = feed.next(line, parsed);
  REQUIRE(more.ok());
  REQUIRE(*more);
  CHECK(line.text == "hello");
  CHECK(idle >= 3);
  CHECK_FALSE(*feed.next(line, parsed));
}

TEST_CASE("LineFeed: a read error is an error naming the input", "[line_feed]") {
  TempDir dir;
  // A directory opens but cannot be read.
  LineFeed feed({dir.path()}, kDefaultMaxLineBytes, nullptr);
  Line line;
  const ParsedLine* parsed = nullptr;
  auto got = feed.next(line, parsed);
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().message == "cannot read '" + dir.path() + "': Is a directory");
}

TEST_CASE("LineFeed: '-' is standard input, named <stdin>, between files", "[line_feed]") {
  TempDir dir;
  std::string a = dir.write("a", "a1\n");
  std::string b = dir.write("b", "b1\n");
  Pipe pipe;
  TempDir::write_fd(pipe.write_end, "s1\ns2\n");
  pipe.close_write();
  int saved = ::dup(0);
  ::dup2(pipe.read_end, 0);
  std::vector<Got> got;
  {
    LineFeed feed({a, "-", b}, kDefaultMaxLineBytes, nullptr);
    got = drain(feed);
  }
  ::dup2(saved, 0);
  ::close(saved);
  REQUIRE(got.size() == 4);
  CHECK((got[1].text == "s1" && got[1].input == "<stdin>" && got[1].number == 1));
  CHECK((got[2].text == "s2" && got[2].number == 2));
  CHECK((got[3].text == "b1" && got[3].input == b));
}
