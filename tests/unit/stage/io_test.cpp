#include "kpipe/stage/io.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "helpers.h"

using namespace kpipe;
using kpipe::test::Pipe;
using kpipe::test::TempDir;

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
