#include "kpipe/store/state_lock.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "helpers.h"

using namespace kpipe;

namespace {

std::string busy(const std::string& holder) {
  return "busy " + holder;
}
std::string busy(pid_t pid) {
  return busy("process " + std::to_string(pid));
}
const StateLock::BusyMessage busy_message = [](const std::string& holder) { return busy(holder); };

// A child process that takes `name` of `state` (`shared`: as an instance
// of a consumer group does), says whether it got it ("held" or the error)
// on a pipe and keeps it until `release()`: POSIX locks never conflict
// within one process, so a conflict needs two.
class Holder {
 public:
  Holder(const std::string& state, const std::string& name, bool shared = false) {
    int said[2], told[2];
    REQUIRE(::pipe(said) == 0);
    REQUIRE(::pipe(told) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(said[0]);
      ::close(told[1]);
      auto lock = StateLock::take(state, name, busy_message, shared);
      std::string answer = lock ? "held" : lock.error().message;
      (void)!::write(said[1], answer.data(), answer.size());
      ::close(said[1]);
      char c;
      (void)!::read(told[0], &c, 1);  // until the parent closes its end
      ::_exit(0);
    }
    ::close(said[1]);
    ::close(told[0]);
    release_fd_ = told[1];
    char buf[256];
    ssize_t n = 0;
    for (ssize_t got; (got = ::read(said[0], buf + n, sizeof buf - n)) > 0;) n += got;
    ::close(said[0]);
    answer_.assign(buf, static_cast<size_t>(n));
  }
  ~Holder() { release(); }
  const std::string& answer() const { return answer_; }
  pid_t pid() const { return pid_; }
  void release() {
    if (release_fd_ < 0) return;
    ::close(release_fd_);
    release_fd_ = -1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  void kill() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    ::close(release_fd_);
    release_fd_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int release_fd_ = -1;
  std::string answer_;
};

}  // namespace

TEST_CASE("StateLock: a second process is refused, naming the holder's pid", "[lock]") {
  test::TempDir dir;
  std::string state = dir.file("p.db");
  Holder first(state, "stage:kdedup");
  REQUIRE(first.answer() == "held");
  auto second = StateLock::take(state, "stage:kdedup", busy_message);
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().message == busy(first.pid()));
  CHECK(second.error().status == ExitStatus::kFailure);
  auto holder = StateLock::holder(state, "stage:kdedup");
  REQUIRE(holder.ok());
  CHECK(*holder == first.pid());
  first.release();
  auto after = StateLock::take(state, "stage:kdedup", busy_message);
  CHECK(after.ok());
}

TEST_CASE("StateLock: a lock dies with its process, even by SIGKILL", "[lock]") {
  test::TempDir dir;
  std::string state = dir.file("p.db");
  Holder first(state, "kconsume");
  REQUIRE(first.answer() == "held");
  first.kill();
  auto holder = StateLock::holder(state, "kconsume");
  REQUIRE(holder.ok());
  CHECK(*holder == 0);
  CHECK(StateLock::take(state, "kconsume", busy_message).ok());
}

TEST_CASE("StateLock: other names of the same file are free", "[lock]") {
  test::TempDir dir;
  std::string state = dir.file("p.db");
  Holder first(state, "stage:kdedup");
  REQUIRE(first.answer() == "held");
  CHECK(StateLock::take(state, "stage:kdedup/b", busy_message).ok());
  CHECK(StateLock::take(state, "kconsume", busy_message).ok());
}

TEST_CASE("StateLock: the lock file is 0600 beside the database and stays", "[lock]") {
  test::TempDir dir;
  std::string state = dir.file("p.db");
  { REQUIRE(StateLock::take(state, "kconsume", busy_message).ok()); }
  struct stat st {};
  REQUIRE(::stat(StateLock::lock_path(state).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  char* real = ::realpath(dir.path().c_str(), nullptr);
  REQUIRE(real != nullptr);
  CHECK(StateLock::lock_path(state) == std::string(real) + "/p.db.lock");
  std::free(real);
}

TEST_CASE("StateLock: one process taking a name twice is refused too", "[lock]") {
  test::TempDir dir;
  std::string state = dir.file("p.db");
  auto first = StateLock::take(state, "stage:kwindow", busy_message);
  REQUIRE(first.ok());
  auto second = StateLock::take(state, "stage:kwindow", busy_message);
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().message == busy(::getpid()));
}

TEST_CASE("StateLock: releasing one lock keeps the others of the file", "[lock]") {
  // Closing any descriptor of a file drops all of a process's locks on it:
  // the second lock must outlive the first's release.
  test::TempDir dir;
  std::string state = dir.file("p.db");
  auto a = StateLock::take(state, "stage:a", busy_message);
  auto b = StateLock::take(state, "stage:b", busy_message);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  a->reset();
  Holder other(state, "stage:b");
  CHECK(other.answer() == busy(::getpid()));
  Holder freed(state, "stage:a");
  CHECK(freed.answer() == "held");
}

TEST_CASE("StateLock: a symbolic link to the database shares its lock", "[lock]") {
  test::TempDir dir;
  std::string state = dir.write("p.db", "");
  std::string link = dir.file("q.db");
  REQUIRE(::symlink(state.c_str(), link.c_str()) == 0);
  Holder first(state, "kconsume");
  REQUIRE(first.answer() == "held");
  auto second = StateLock::take(link, "kconsume", busy_message);
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().message == busy(first.pid()));
}

// --- shared locks (kpipe(7), MANY INSTANCES) ----------------------------------

TEST_CASE("StateLock: shared holders coexist, and refuse a holder alone", "[lock]") {
  test::TempDir dir;
  std::string state = dir.file("p.db");
  Holder first(state, "stage:kdedup", true);
  Holder second(state, "stage:kdedup", true);
  REQUIRE(first.answer() == "held");
  REQUIRE(second.answer() == "held");
  auto mine = StateLock::take(state, "stage:kdedup", busy_message, true);
  REQUIRE(mine.ok());

  // Three instances hold it: a process that wants it alone is told one of
  // them.
  Holder alone(state, "stage:kdedup");
  CHECK((alone.answer() == busy(first.pid()) || alone.answer() == busy(second.pid()) ||
         alone.answer() == busy(::getpid())));
  mine->reset();
  auto holder = StateLock::holder(state, "stage:kdedup");
  REQUIRE(holder.ok());
  CHECK((*holder == first.pid() || *holder == second.pid()));
}

TEST_CASE("StateLock: a lock held alone refuses a shared take, naming its holder", "[lock]") {
  test::TempDir dir;
  std::string state = dir.file("p.db");
  Holder single(state, "kconsume");
  REQUIRE(single.answer() == "held");
  auto shared = StateLock::take(state, "kconsume", busy_message, true);
  REQUIRE_FALSE(shared.ok());
  CHECK(shared.error().message == busy(single.pid()));
  single.release();
  auto instance = StateLock::take(state, "kconsume", busy_message, true);
  REQUIRE(instance.ok());
  // And the other way round: this process holds it shared now.
  Holder late(state, "kconsume");
  CHECK(late.answer() == busy(::getpid()));
  // One process takes a name once, shared or not.
  auto again = StateLock::take(state, "kconsume", busy_message, true);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message == busy(::getpid()));
}

TEST_CASE("StateLock: a shared lock dies with its process, even by SIGKILL", "[lock]") {
  test::TempDir dir;
  std::string state = dir.file("p.db");
  Holder instance(state, "stage:kwindow", true);
  REQUIRE(instance.answer() == "held");
  REQUIRE_FALSE(StateLock::take(state, "stage:kwindow", busy_message).ok());
  instance.kill();
  CHECK(*StateLock::holder(state, "stage:kwindow") == 0);
  CHECK(StateLock::take(state, "stage:kwindow", busy_message).ok());
}
