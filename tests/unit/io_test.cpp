#include "kpipe/io.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "helpers.h"
#include "kpipe/json.h"

using namespace kpipe;
using kpipe::test::Pipe;
using kpipe::test::TempDir;

namespace {

struct Got {
  std::string text;
  uint64_t number;
  bool too_long;
};

// Every line of a reader, copied (views die at the next call).
std::vector<Got> drain(LineReader& r) {
  std::vector<Got> out;
  Line line;
  for (;;) {
    auto more = r.next(line);
    REQUIRE(more.ok());
    if (!*more) break;
    out.push_back({std::string(line.text), line.number, line.too_long});
  }
  return out;
}

std::vector<Got> read_all_of(const std::string& bytes,
                             size_t max_line_bytes = kDefaultMaxLineBytes) {
  TempDir dir;
  auto r = LineReader::open(dir.write("in", bytes), max_line_bytes);
  REQUIRE(r.ok());
  return drain(**r);
}

std::vector<std::string> texts(const std::vector<Got>& got) {
  std::vector<std::string> out;
  for (const auto& g : got) out.push_back(g.text);
  return out;
}

// Makes standard input read from `fd` for the lifetime of the object.
class StdinFrom {
 public:
  explicit StdinFrom(int fd) : saved_(::dup(0)) { ::dup2(fd, 0); }
  ~StdinFrom() {
    ::dup2(saved_, 0);
    ::close(saved_);
  }

 private:
  int saved_;
};

}  // namespace

TEST_CASE("LineReader: a line split over several reads comes out whole", "[io]") {
  // The before_read hook feeds the pipe one chunk per read, so every read
  // returns exactly one chunk and the reader must carry partial lines over.
  Pipe pipe;
  std::vector<std::string> chunks = {"{\"a\"", ":1}\n{\"b\":2", "}\n\n", "la", "st"};
  size_t fed = 0;
  LineReader r(pipe.read_end, "<pipe>");
  r.set_before_read([&] {
    if (fed < chunks.size()) {
      TempDir::write_fd(pipe.write_end, chunks[fed++]);
    } else {
      pipe.close_write();
    }
  });
  auto got = drain(r);
  REQUIRE(got.size() == 4);
  CHECK(got[0].text == "{\"a\":1}");
  CHECK(got[1].text == "{\"b\":2}");
  CHECK(got[2].text == "");
  CHECK(got[3].text == "last");
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].number == i + 1);
  // One read per chunk and one that sees the end: no read without its hook.
  CHECK(fed == chunks.size());
  CHECK(pipe.write_end == -1);
  CHECK(r.bytes_read() == std::string("{\"a\":1}\n{\"b\":2}\n\nlast").size());
  CHECK(r.line_number() == 4);
}

TEST_CASE("LineReader: the before_read hook runs before every read, not per line", "[io]") {
  Pipe pipe;
  TempDir::write_fd(pipe.write_end, "a\nb\nc\n");
  int calls = 0;
  LineReader r(pipe.read_end, "<pipe>");
  r.set_before_read([&] {
    ++calls;
    pipe.close_write();
  });
  Line line;
  REQUIRE(*r.next(line));
  CHECK(calls == 1);
  REQUIRE(*r.next(line));
  REQUIRE(*r.next(line));
  CHECK(line.text == "c");
  CHECK(calls == 1);  // three lines from one read
  REQUIRE_FALSE(*r.next(line));
  CHECK(calls == 2);  // the read that finds the end
}

TEST_CASE("LineReader: a last line without newline", "[io]") {
  CHECK(texts(read_all_of("a\nb")) == std::vector<std::string>{"a", "b"});
  CHECK(texts(read_all_of("only")) == std::vector<std::string>{"only"});
  CHECK(texts(read_all_of("a\n")) == std::vector<std::string>{"a"});
  CHECK(read_all_of("").empty());
}

TEST_CASE("LineReader: CRLF loses its CR, a CR elsewhere stays", "[io]") {
  auto got = read_all_of("a\r\nb\rc\r\n\r\nlast\r");
  CHECK(texts(got) == std::vector<std::string>{"a", "b\rc", "", "last"});
  CHECK(got[3].number == 4);
}

TEST_CASE("LineReader: empty lines are returned and counted", "[io]") {
  auto got = read_all_of("\n\n{}\n\n{\"x\":1}\n");
  REQUIRE(got.size() == 5);
  CHECK(texts(got) == std::vector<std::string>{"", "", "{}", "", "{\"x\":1}"});
  CHECK(got[2].number == 3);
  CHECK(got[4].number == 5);
}

TEST_CASE("LineReader: a line longer than max_line_bytes is whole and flagged", "[io]") {
  std::string ten(10, 'a');
  std::string eleven(11, 'b');
  auto got = read_all_of(ten + "\n" + eleven + "\n" + ten + "\r\n" + "c\n", 10);
  REQUIRE(got.size() == 4);
  CHECK(got[0].text == ten);
  CHECK_FALSE(got[0].too_long);
  CHECK(got[1].text == eleven);
  CHECK(got[1].too_long);
  CHECK(got[1].number == 2);
  // The CR is not part of the line, so it does not count against the limit.
  CHECK(got[2].text == ten);
  CHECK_FALSE(got[2].too_long);
  CHECK(got[3].text == "c");
  CHECK_FALSE(got[3].too_long);
}

TEST_CASE("LineReader: a line longer than the 1 MiB buffer grows it", "[io]") {
  // Lines of 3 MiB and 1 MiB + 1 around short ones: the buffer must grow
  // twice and still hand out every byte in order.
  std::string big(3u << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<char>('a' + i % 26);
  std::string edge((1u << 20) + 1, 'y');
  auto got = read_all_of("s1\n" + big + "\n" + "s2\n" + edge + "\nend", 2u << 20);
  REQUIRE(got.size() == 5);
  CHECK(got[0].text == "s1");
  CHECK(got[1].text.size() == big.size());
  CHECK(got[1].text == big);
  CHECK(got[1].too_long);
  CHECK(got[2].text == "s2");
  CHECK(got[3].text == edge);
  CHECK_FALSE(got[3].too_long);
  CHECK(got[4].text == "end");
  CHECK(got[4].number == 5);
}

TEST_CASE("LineReader: each line is followed by readable padding simdjson can parse in place",
          "[io]") {
  // A file that ends exactly where the first buffer ends, without newline,
  // then lines whose ends fall on every offset near the buffer boundary: a
  // JsonReader parses each in place (under ASan, any read past the padding
  // would be reported).
  TempDir dir;
  std::string body;
  std::vector<std::string> lines;
  size_t target = 1u << 20;
  int n = 0;
  while (body.size() < target - 200) {
    std::string l = "{\"n\":" + std::to_string(n) + ",\"pad\":\"" +
                    std::string(static_cast<size_t>(n % 97), 'p') + "\"}";
    ++n;
    lines.push_back(l);
    body += l + "\n";
  }
  std::string last = "{\"last\":\"" + std::string(target - body.size() - 11, 'z') + "\"}";
  REQUIRE(body.size() + last.size() == target);
  lines.push_back(last);
  body += last;
  auto r = LineReader::open(dir.write("in", body));
  REQUIRE(r.ok());
  JsonReader json;
  FieldSet fields;
  fields.add(FieldPath::parse(".n").value());
  std::vector<JsonField> out;
  Line line;
  size_t i = 0;
  for (;;) {
    auto more = (*r)->next(line);
    REQUIRE(more.ok());
    if (!*more) break;
    REQUIRE(i < lines.size());
    REQUIRE(line.text == lines[i]);
    volatile char sink = 0;
    for (size_t k = 0; k < kJsonPadding; ++k) sink = sink ^ line.text.data()[line.text.size() + k];
    (void)sink;
    Status s = json.read(line.text, fields, out);
    INFO("line " << i + 1);
    REQUIRE(s.ok());
    if (i + 1 < lines.size()) {
      CHECK(out[0].integer == static_cast<int64_t>(i));
    } else {
      CHECK(out[0].type == JsonType::kMissing);
    }
    ++i;
  }
  CHECK(i == lines.size());
}

TEST_CASE("LineReader: open names the input and reports a missing file", "[io]") {
  TempDir dir;
  auto missing = LineReader::open(dir.file("nope.ndjson"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().status == ExitStatus::kFailure);
  CHECK(missing.error().message ==
        "cannot open '" + dir.file("nope.ndjson") + "': No such file or directory");
  auto ok = LineReader::open(dir.write("in", "x\n"));
  REQUIRE(ok.ok());
  CHECK((*ok)->name() == dir.file("in"));
  auto stdin_reader = LineReader::open("-");
  REQUIRE(stdin_reader.ok());
  CHECK((*stdin_reader)->name() == "<stdin>");
}

TEST_CASE("LineReader: a read error is an error naming the input", "[io]") {
  TempDir dir;
  // A directory opens but cannot be read.
  auto r = LineReader::open(dir.path());
  REQUIRE(r.ok());
  Line line;
  auto got = (*r)->next(line);
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().message == "cannot read '" + dir.path() + "': Is a directory");
}

TEST_CASE("LineReader: the stop flag ends input instead of waiting", "[io]") {
  Pipe pipe;  // the write end stays open: without the flag, next() would block
  std::atomic<bool> stop{false};
  LineReader r(pipe.read_end, "<pipe>");
  r.set_stop_check([&] { return stop.load(); });
  TempDir::write_fd(pipe.write_end, "one\ntwo\n");
  Line line;
  REQUIRE(*r.next(line));
  CHECK(line.text == "one");
  stop = true;
  // A line already read is still delivered; then the end, without a read.
  REQUIRE(*r.next(line));
  CHECK(line.text == "two");
  auto more = r.next(line);
  REQUIRE(more.ok());
  CHECK_FALSE(*more);
}

TEST_CASE("LineReader: a stop does not turn half a line into a line", "[io]") {
  // SIGINT while the pipe has delivered only part of a record: that part is
  // not a record, and handing it on would make a clean stop a data error.
  Pipe pipe;
  std::atomic<bool> stop{false};
  LineReader r(pipe.read_end, "<pipe>");
  r.set_stop_check([&] { return stop.load(); });
  TempDir::write_fd(pipe.write_end, "{\"a\":1}\n{\"b\":");
  int reads = 0;
  r.set_before_read([&] {
    if (++reads == 2) stop = true;  // the read after the partial line
  });
  Line line;
  REQUIRE(*r.next(line));
  CHECK(line.text == "{\"a\":1}");
  auto more = r.next(line);
  REQUIRE(more.ok());
  CHECK_FALSE(*more);
}

TEST_CASE("LineReader: the idle hook runs while a pipe is quiet", "[io]") {
  Pipe pipe;  // never written to
  LineReader r(pipe.read_end, "<pipe>");
  std::atomic<bool> stop{false};
  r.set_stop_check([&] { return stop.load(); });
  int calls = 0;
  r.set_idle_hook(2, [&]() -> Status {
    if (++calls == 3) stop = true;
    return {};
  });
  Line line;
  auto more = r.next(line);
  REQUIRE(more.ok());
  CHECK_FALSE(*more);
  CHECK(calls == 3);
}

TEST_CASE("LineReader: an error from the idle hook is returned by next", "[io]") {
  Pipe pipe;
  LineReader r(pipe.read_end, "<pipe>");
  int calls = 0;
  r.set_idle_hook(1, [&]() -> Status {
    if (++calls == 2) return failure("deadline missed for 'x'");
    return {};
  });
  Line line;
  auto more = r.next(line);
  REQUIRE_FALSE(more.ok());
  CHECK(more.error().message == "deadline missed for 'x'");
  CHECK(calls == 2);
}

TEST_CASE("LineReader: input that arrives after idle periods is read", "[io]") {
  Pipe pipe;
  LineReader r(pipe.read_end, "<pipe>");
  int calls = 0;
  r.set_idle_hook(1, [&]() -> Status {
    // The second idle call supplies the data and the end.
    if (++calls == 2) {
      TempDir::write_fd(pipe.write_end, "late\n");
      pipe.close_write();
    }
    return {};
  });
  Line line;
  REQUIRE(*r.next(line));
  CHECK(line.text == "late");
  CHECK(calls == 2);
  CHECK_FALSE(*r.next(line));
}

TEST_CASE("InputList: files in order, line numbers per input, the name of each", "[io]") {
  TempDir dir;
  std::string a = dir.write("a.ndjson", "a1\na2\n");
  std::string b = dir.write("b.ndjson", "b1");
  std::string c = dir.write("c.ndjson", "");
  InputList inputs({a, c, b});
  Line line;
  std::vector<std::string> seen;
  for (;;) {
    auto more = inputs.next(line);
    REQUIRE(more.ok());
    if (!*more) break;
    seen.push_back(std::string(line.text) + "@" + inputs.name() + ":" +
                   std::to_string(line.number));
  }
  CHECK(seen == std::vector<std::string>{"a1@" + a + ":1", "a2@" + a + ":2", "b1@" + b + ":1"});
}

TEST_CASE("InputList: '-' reads standard input between files", "[io]") {
  TempDir dir;
  std::string a = dir.write("a", "from-a\n");
  std::string b = dir.write("b", "from-b\n");
  Pipe pipe;
  TempDir::write_fd(pipe.write_end, "s1\ns2\n");
  pipe.close_write();
  StdinFrom redirect(pipe.read_end);
  InputList inputs({a, "-", b});
  Line line;
  std::vector<std::string> seen;
  while (*inputs.next(line)) {
    seen.push_back(inputs.name() + ":" + std::string(line.text) + ":" +
                   std::to_string(line.number));
  }
  CHECK(seen ==
        std::vector<std::string>{a + ":from-a:1", "<stdin>:s1:1", "<stdin>:s2:2", b + ":from-b:1"});
}

TEST_CASE("InputList: no paths means standard input", "[io]") {
  Pipe pipe;
  TempDir::write_fd(pipe.write_end, "x\n");
  pipe.close_write();
  StdinFrom redirect(pipe.read_end);
  InputList inputs({});
  Line line;
  REQUIRE(*inputs.next(line));
  CHECK(line.text == "x");
  CHECK(inputs.name() == "<stdin>");
  CHECK_FALSE(*inputs.next(line));
}

TEST_CASE("InputList: a missing file is an error after the inputs before it", "[io]") {
  TempDir dir;
  std::string a = dir.write("a", "ok\n");
  InputList inputs({a, dir.file("missing")});
  Line line;
  REQUIRE(*inputs.next(line));
  CHECK(line.text == "ok");
  auto more = inputs.next(line);
  REQUIRE_FALSE(more.ok());
  CHECK(more.error().message ==
        "cannot open '" + dir.file("missing") + "': No such file or directory");
}

TEST_CASE("InputList: hooks and the stop check reach every reader", "[io]") {
  TempDir dir;
  std::string a = dir.write("a", "1\n");
  std::string b = dir.write("b", "2\n");
  std::atomic<bool> stop{false};
  int reads = 0;
  InputList inputs({a, b});
  inputs.set_before_read([&] { ++reads; });
  inputs.set_stop_check([&] { return stop.load(); });
  Line line;
  REQUIRE(*inputs.next(line));
  CHECK(reads == 1);
  stop = true;
  CHECK_FALSE(*inputs.next(line));  // b is never opened
  CHECK(inputs.name() == a);
}

TEST_CASE("Output: writes reach the fd only at the flush threshold", "[io]") {
  TempDir dir;
  std::string path = dir.file("out");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  {
    Output out(fd, "out", 16);
    out.write_line("0123456");  // 8 bytes
    REQUIRE(out.end_record().ok());
    CHECK(test::read_file(path).empty());
    out.write("89abcde");  // 15 bytes
    REQUIRE(out.end_record().ok());
    CHECK(test::read_file(path).empty());
    out.write_line("");  // 16: the threshold
    REQUIRE(out.end_record().ok());
    CHECK(test::read_file(path) == "0123456\n89abcde\n");
    CHECK(out.bytes_written() == 16);
    CHECK(out.buffer().empty());
    out.buffer().append("tail");  // built in place
    REQUIRE(out.flush().ok());
    CHECK(test::read_file(path) == "0123456\n89abcde\ntail");
    out.write("unflushed");
  }
  // The destructor flushes what is left.
  CHECK(test::read_file(path) == "0123456\n89abcde\ntailunflushed");
  ::close(fd);
}

TEST_CASE("Output: a closed downstream pipe is closed(), not an error", "[io]") {
  auto previous = std::signal(SIGPIPE, SIG_IGN);
  Pipe pipe;
  pipe.close_read();
  Output out(pipe.write_end, "<stdout>", 4);
  CHECK_FALSE(out.closed());
  out.write_line("record");
  Status s = out.end_record();
  CHECK(s.ok());
  CHECK(out.closed());
  out.write_line("more");
  CHECK(out.flush().ok());
  CHECK(out.buffer().empty());
  CHECK(out.bytes_written() == 0);
  std::signal(SIGPIPE, previous);
}

TEST_CASE("Output: check_closed sees a reader gone without writing", "[io]") {
  Pipe pipe;
  Output out(pipe.write_end, "<stdout>");
  out.write("pending");
  CHECK_FALSE(out.check_closed());
  CHECK_FALSE(out.closed());
  pipe.close_read();
  CHECK(out.check_closed());
  CHECK(out.closed());
  CHECK(out.buffer().empty());  // what was pending is dropped
  CHECK(out.bytes_written() == 0);
}

TEST_CASE("Output: a write error is an error naming the output", "[io]") {
  int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    WARN("no /dev/full here");
    return;
  }
  {
    Output out(fd, "full.ndjson", 4);
    out.write_line("data");
    Status s = out.end_record();
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().status == ExitStatus::kFailure);
    CHECK(s.error().message == "cannot write 'full.ndjson': No space left on device");
    CHECK_FALSE(out.closed());
  }
  ::close(fd);
  CHECK_FALSE(write_all(-1, "x", "bad").ok());
  CHECK(write_all(-1, "x", "bad").error().message == "cannot write 'bad': Bad file descriptor");
}

TEST_CASE("Output: open_append creates the file or appends to it", "[io]") {
  TempDir dir;
  std::string path = dir.write("log", "old\n");
  {
    auto out = Output::open_append(path);
    REQUIRE(out.ok());
    CHECK((*out)->name() == path);
    (*out)->write_line("new");
  }
  CHECK(test::read_file(path) == "old\nnew\n");
  std::string fresh = dir.file("fresh");
  {
    auto out = Output::open_append(fresh);
    REQUIRE(out.ok());
    (*out)->write_line("x");
  }
  CHECK(test::read_file(fresh) == "x\n");
  auto bad = Output::open_append(dir.file("no/such/dir"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message ==
        "cannot open '" + dir.file("no/such/dir") + "': No such file or directory");
}

TEST_CASE("write_all writes everything, however large", "[io]") {
  TempDir dir;
  std::string path = dir.file("big");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  std::string data(5u << 20, 'q');
  data[12345] = '!';
  REQUIRE(write_all(fd, data, "big").ok());
  ::close(fd);
  CHECK(test::read_file(path) == data);
}
