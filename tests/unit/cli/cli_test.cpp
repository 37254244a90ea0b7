#include "kpipe/cli/cli.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "helpers.h"
#include "kpipe/stage/checkpoint_meter.h"

using namespace kpipe;

namespace {

// A datagram socket bound where NOTIFY_SOCKET points, as systemd listens.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof addr.sun_path);
    path.copy(addr.sun_path, path.size());
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  }
  ~NotifySocket() {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(fd_);
  }
  // The next datagram; sd_notify has sent it before it returned.
  std::string next() {
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

Checkpoint checkpoint(int64_t id, Millis at) {
  Checkpoint c;
  c.id = id;
  c.at = at;
  return c;
}

}  // namespace

TEST_CASE("make_service_notifier: none without NOTIFY_SOCKET", "[cli]") {
  ::unsetenv("NOTIFY_SOCKET");
  CHECK(cli::make_service_notifier() == nullptr);
}

TEST_CASE("the terminal stage's checkpoints reach systemd: READY=1 at the first, WATCHDOG=1 after",
          "[cli]") {
  test::TempDir dir;
  NotifySocket socket(dir.file("notify"));
  auto notifier = cli::make_service_notifier();
  REQUIRE(notifier != nullptr);
  CheckpointMeter meter;
  meter.notify_to(notifier.get());
  CHECK(socket.next().empty());  // nothing before a checkpoint completes
  meter.passed(checkpoint(7, 1000), 1250);
  CHECK(socket.next() ==
        "READY=1\nSTATUS=checkpoint 7 complete 250 ms after its barrier; 1 since "
        "the start");
  meter.passed(checkpoint(8, 2000), 2100);
  CHECK(socket.next() ==
        "WATCHDOG=1\nSTATUS=checkpoint 8 complete 100 ms after its barrier; 2 "
        "since the start");
  meter.passed(checkpoint(9, 3000), 3020);
  CHECK(socket.next().starts_with("WATCHDOG=1\n"));
  CHECK(socket.next().empty());
}

TEST_CASE("a stage's meter without a notifier tells nobody", "[cli]") {
  test::TempDir dir;
  NotifySocket socket(dir.file("notify"));
  CheckpointMeter meter;  // kdedup's: it saves, it does not complete
  meter.passed(checkpoint(1, 0), 10);
  CHECK(socket.next().empty());
  Counters c;
  meter.fill(c);
  CHECK(c.checkpoints == 1);
  CHECK(c.checkpoint_took == 10);
  CHECK(c.checkpoint_at == 10);
}

TEST_CASE("diagnostics carry syslog priorities when standard error is the journal", "[cli]") {
  test::TempDir dir;
  std::string path = dir.file("stderr");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  std::string stream = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  CHECK(cli::is_journal_stream(stream.c_str(), fd));
  CHECK_FALSE(cli::is_journal_stream(nullptr, fd));
  CHECK_FALSE(cli::is_journal_stream("", fd));
  CHECK_FALSE(cli::is_journal_stream("1:2", fd));  // another stream: redirected
  CHECK_FALSE(cli::is_journal_stream((stream + "x").c_str(), fd));
  {
    cli::StderrReporter journal("kdedup", stream.c_str(), fd);
    journal.set_verbosity(2);
    journal.error("line 3: not JSON");
    journal.warning("slow");
    journal.info("done");
    journal.debug("rdkafka: hello");
    journal.stats("{\"in\":1}");
    cli::StderrReporter plain("kdedup", "1:2", fd);
    plain.warning("slow");
  }
  ::close(fd);
  CHECK(test::read_file(path) ==
        "<3>kdedup: error: line 3: not JSON\n"
        "<4>kdedup: warning: slow\n"
        "<6>kdedup: done\n"
        "<7>kdedup: debug: rdkafka: hello\n"
        "<6>{\"in\":1}\n"
        "kdedup: warning: slow\n");
}
