#include "kpipe/stage/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
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

TEST_CASE("Output: a pipe of the default size grows to 1 MiB, one sized on purpose stays", "[io]") {
  Pipe plain;
  REQUIRE(::fcntl(plain.write_end, F_GETPIPE_SZ) == 65536);
  Output out(plain.write_end);
  // Where the system allows less than 1 MiB, the pipe stays as it was.
  int max = std::stoi(test::read_file("/proc/sys/fs/pipe-max-size"));
  CHECK(::fcntl(plain.write_end, F_GETPIPE_SZ) == (max >= (1 << 20) ? (1 << 20) : 65536));

  Pipe small;
  REQUIRE(::fcntl(small.write_end, F_SETPIPE_SZ, 4096) >= 0);
  Output small_out(small.write_end);
  CHECK(::fcntl(small.write_end, F_GETPIPE_SZ) == 4096);
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

namespace {

// Reads exactly `n` bytes from `fd` (the test's reader).
std::string read_exactly(int fd, size_t n) {
  std::string got(n, '\0');
  size_t have = 0;
  while (have < n) {
    ssize_t r = ::read(fd, got.data() + have, n - have);
    if (r <= 0) break;
    have += static_cast<size_t>(r);
  }
  got.resize(have);
  return got;
}

}  // namespace

TEST_CASE("Output: a line in a pipe its reader has not read is not delivered", "[io]") {
  Pipe pipe;
  Output out(pipe.write_end);
  out.write_line("{\"n\":1}");
  out.write_line("{\"n\":2}");
  CHECK(out.end_position() == 16);
  REQUIRE(out.flush().ok());
  CHECK(out.bytes_written() == 16);
  CHECK(out.bytes_delivered() == 0);
  auto waited = out.wait_delivered(8, 0);
  REQUIRE(waited.ok());
  CHECK(*waited == Output::Drain::kTimedOut);

  CHECK(read_exactly(pipe.read_end, 8) == "{\"n\":1}\n");
  CHECK(out.bytes_delivered() == 8);
  waited = out.wait_delivered(8, 0);
  REQUIRE(waited.ok());
  CHECK(*waited == Output::Drain::kDelivered);
  CHECK(read_exactly(pipe.read_end, 8) == "{\"n\":2}\n");
  CHECK(out.bytes_delivered() == 16);
}

TEST_CASE("Output: what a reader read before it died stays delivered, the rest does not", "[io]") {
  auto previous = std::signal(SIGPIPE, SIG_IGN);
  Pipe pipe;
  Output out(pipe.write_end);
  out.write("0123456789");
  REQUIRE(out.flush().ok());
  CHECK(read_exactly(pipe.read_end, 3) == "012");
  pipe.close_read();
  auto waited = out.wait_delivered(10);
  REQUIRE(waited.ok());
  CHECK(*waited == Output::Drain::kClosed);
  CHECK(out.closed());
  CHECK(out.bytes_delivered() == 3);
  std::signal(SIGPIPE, previous);
}

TEST_CASE("Output: wait_delivered returns once the reader has read", "[io]") {
  Pipe pipe;
  Output out(pipe.write_end);
  std::string line(1000, 'x');
  for (int i = 0; i < 50; ++i) out.write_line(line);
  uint64_t end = out.end_position();
  std::string got;
  std::thread reader([&] { got = read_exactly(pipe.read_end, end); });
  auto waited = out.wait_delivered(end);  // flushes, then waits
  reader.join();
  REQUIRE(waited.ok());
  CHECK(*waited == Output::Drain::kDelivered);
  CHECK(got.size() == end);
  CHECK(out.bytes_delivered() == end);
}

TEST_CASE("Output: a regular file takes what is written", "[io]") {
  TempDir dir;
  std::string path = dir.file("out");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  {
    Output out(fd, "out");
    out.write_line("x");
    CHECK(out.bytes_delivered() == 0);
    auto waited = out.wait_delivered(out.end_position(), 0);
    REQUIRE(waited.ok());
    CHECK(*waited == Output::Drain::kDelivered);
    CHECK(out.bytes_delivered() == 2);
  }
  ::close(fd);
}

TEST_CASE("Output: the tick hook runs while a write waits for a slow reader", "[io]") {
  Pipe pipe;
  // The smallest pipe, so that a 64 KiB flush has to wait.
  (void)::fcntl(pipe.write_end, F_SETPIPE_SZ, 4096);
  Output out(pipe.write_end);
  std::atomic<int> ticks{0};
  out.set_tick_hook([&]() -> Status {
    // A hook must not write: what it adds anyway waits for the next flush.
    if (++ticks == 1) out.write("the hook must not write");
    return {};
  });
  std::string data(1u << 16, 'q');
  // The reader starts reading only once the hook has run twice: a write
  // that blocked in write() instead of poll() would never let it.
  std::string got;
  std::thread reader([&] {
    while (ticks.load() < 2) std::this_thread::yield();
    got = read_exactly(pipe.read_end, data.size());
  });
  out.write(data);
  Status s = out.flush();
  reader.join();
  REQUIRE(s.ok());
  CHECK(ticks.load() >= 2);
  CHECK(got == data);
  CHECK(out.bytes_written() == data.size());
  CHECK(out.blocked_ms() > 0);
  CHECK(out.buffer() == "the hook must not write");
  out.buffer().clear();
}

TEST_CASE("Output: a write error fails every later flush too, so no checkpoint passes lost lines",
          "[io]") {
  int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    WARN("no /dev/full here");
    return;
  }
  {
    Output out(fd, "<stdout>");
    out.write_line("a record");
    Status s = out.flush();
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message == "cannot write '<stdout>': No space left on device");
    // A caller that ignored it (the flush before waiting for input) must
    // not see the next flush, with the buffer empty, succeed: the terminal
    // stage would then complete the checkpoint after the lost record.
    CHECK_FALSE(out.flush().ok());
    out.write_line("{\"$kpipe\":\"checkpoint\",\"id\":1}");
    Status again = out.flush();
    REQUIRE_FALSE(again.ok());
    CHECK(again.error().message == s.error().message);
    CHECK(out.bytes_written() == 0);
    CHECK(out.bytes_delivered() == 0);
  }
  ::close(fd);
}

TEST_CASE("Output: output given up on a stop fails every later flush too", "[io]") {
  Pipe pipe;  // a reader that never reads
  (void)::fcntl(pipe.write_end, F_SETPIPE_SZ, 4096);
  Output out(pipe.write_end);
  out.set_stop_check([] { return true; });
  out.write(std::string(1u << 16, 'q'));
  Status s = out.flush();  // waits out the grace period
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message.rfind("stopped with ", 0) == 0);
  // A caller that ignored that error (a flush before waiting for input)
  // must not see a later flush, with nothing left to write, succeed:
  // output was lost.
  Status again = out.flush();
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message == s.error().message);
  CHECK(out.buffer().empty());
}

TEST_CASE("Output: a tick hook's error ends the flush, and what was written is not written again",
          "[io]") {
  Pipe pipe;
  (void)::fcntl(pipe.write_end, F_SETPIPE_SZ, 4096);
  Output out(pipe.write_end);
  out.set_tick_hook([]() -> Status { return failure("cannot commit offsets: broker down"); });
  std::string data(1u << 16, 'q');
  out.write(data);
  Status s = out.flush();
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message == "cannot commit offsets: broker down");
  CHECK(out.bytes_written() + out.buffer().size() == data.size());
  out.set_tick_hook(nullptr);
  std::string got;
  std::thread reader([&] { got = read_exactly(pipe.read_end, data.size()); });
  REQUIRE(out.flush().ok());
  reader.join();
  CHECK(got == data);
}

TEST_CASE("Output: the tick hook runs once when the reader is found gone", "[io]") {
  auto previous = std::signal(SIGPIPE, SIG_IGN);
  Pipe pipe;
  Output out(pipe.write_end);
  int calls = 0;
  out.set_tick_hook([&]() -> Status {
    ++calls;
    CHECK(out.closed());
    return {};
  });
  pipe.close_read();
  out.write_line("x");
  REQUIRE(out.flush().ok());
  CHECK(out.closed());
  CHECK(calls == 1);
  out.write_line("y");
  REQUIRE(out.flush().ok());
  CHECK(out.check_closed());
  CHECK(calls == 1);
  std::signal(SIGPIPE, previous);
}

TEST_CASE("wait_for_input: returns once standard input has a line or has ended", "[io]") {
  InputOptions stdin_only;
  SECTION("a line is there") {
    Pipe p;
    REQUIRE(::write(p.write_end, "{}\n", 3) == 3);
    CHECK(wait_for_input(stdin_only, nullptr, p.read_end).ok());
    char buf[4];
    CHECK(::read(p.read_end, buf, sizeof buf) == 3);  // nothing was read from it
  }
  SECTION("the writer is gone") {
    Pipe p;
    p.close_write();
    CHECK(wait_for_input(stdin_only, nullptr, p.read_end).ok());
  }
  SECTION("a stop is asked for while nothing comes") {
    Pipe p;
    std::atomic<bool> stop{true};
    CHECK(wait_for_input(stdin_only, &stop, p.read_end).ok());
  }
  SECTION("files only: no waiting on standard input") {
    Pipe p;  // empty and open: waiting on it would never end
    InputOptions files;
    files.inputs = {"a.ndjson"};
    CHECK(wait_for_input(files, nullptr, p.read_end).ok());
    files.inputs.push_back("-");
    std::atomic<bool> stop{true};
    CHECK(wait_for_input(files, &stop, p.read_end).ok());  // "-" is standard input
  }
}

TEST_CASE("write_file_atomically: a failed write leaves no temporary file behind", "[io]") {
  TempDir dir;
  // --metrics naming a folder: the rename fails, and FOLDER.tmp stayed.
  std::string folder = dir.file("metrics");
  REQUIRE(::mkdir(folder.c_str(), 0755) == 0);
  Status s = write_file_atomically(folder, "a 1\n");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        "cannot rename '" + folder + ".tmp' to '" + folder + "': Is a directory");
  CHECK_FALSE(std::filesystem::exists(folder + ".tmp"));
  CHECK(std::filesystem::is_directory(folder));
  // Written again, as every 5 s: still nothing left behind.
  REQUIRE_FALSE(write_file_atomically(folder, "a 2\n").ok());
  CHECK_FALSE(std::filesystem::exists(folder + ".tmp"));
  // A write that works leaves the file and nothing else.
  std::string file = dir.file("k.prom");
  REQUIRE(write_file_atomically(file, "b 1\n").ok());
  CHECK(test::read_file(file) == "b 1\n");
  CHECK_FALSE(std::filesystem::exists(file + ".tmp"));
}

TEST_CASE("await_instance: the instance a first line names, without reading it", "[io]") {
  InputOptions stdin_only;
  std::string line =
      "{\"$kpipe\":\"instance\",\"name\":\"a\",\"group\":\"g\",\"pipeline\":\"0f\"}\n";
  SECTION("from a pipe") {
    Pipe p;
    REQUIRE(::write(p.write_end, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
    auto i = await_instance(stdin_only, nullptr, p.read_end);
    REQUIRE(i.ok());
    REQUIRE(*i);
    CHECK((*i)->name == "a");
    CHECK((*i)->pipeline == "0f");
    char buf[256];
    CHECK(::read(p.read_end, buf, sizeof buf) == static_cast<ssize_t>(line.size()));
  }
  SECTION("a first line of data, or none") {
    Pipe p;
    REQUIRE(::write(p.write_end, "{\"a\":1}\n", 8) == 8);
    auto i = await_instance(stdin_only, nullptr, p.read_end);
    REQUIRE(i.ok());
    CHECK_FALSE(*i);
    Pipe empty;
    empty.close_write();
    auto none = await_instance(stdin_only, nullptr, empty.read_end);
    REQUIRE(none.ok());
    CHECK_FALSE(*none);
  }
  SECTION("a line written in two parts") {
    Pipe p;
    REQUIRE(::write(p.write_end, line.data(), 10) == 10);
    // Whenever the rest comes, before or while it looks.
    std::thread rest([&] { (void)!::write(p.write_end, line.data() + 10, line.size() - 10); });
    auto i = await_instance(stdin_only, nullptr, p.read_end);
    rest.join();
    REQUIRE(i.ok());
    REQUIRE(*i);
    CHECK((*i)->name == "a");
  }
  SECTION("from one file named as the input") {
    TempDir dir;
    std::string path = dir.file("kept.ndjson");
    {
      std::ofstream f(path);
      f << line << "{\"a\":1}\n";
    }
    InputOptions one_file;
    one_file.inputs = {path};
    auto i = await_instance(one_file, nullptr);
    REQUIRE(i.ok());
    REQUIRE(*i);
    CHECK((*i)->name == "a");
    one_file.inputs.push_back(path);
    auto two = await_instance(one_file, nullptr);
    REQUIRE(two.ok());
    CHECK_FALSE(*two);
  }
  SECTION("from a file, at its current offset") {
    TempDir dir;
    std::string path = dir.file("in.ndjson");
    {
      std::ofstream f(path);
      f << line << "{\"a\":1}\n";
    }
    int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    auto i = await_instance(stdin_only, nullptr, fd);
    REQUIRE(i.ok());
    CHECK(*i);
    REQUIRE(::lseek(fd, static_cast<off_t>(line.size()), SEEK_SET) > 0);
    auto next = await_instance(stdin_only, nullptr, fd);
    REQUIRE(next.ok());
    CHECK_FALSE(*next);
    ::close(fd);
  }
}
