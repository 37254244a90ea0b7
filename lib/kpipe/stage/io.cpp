#include "kpipe/stage/io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>

namespace kpipe {

namespace {

// How long a program asked to stop waits for a reader that does not read.
constexpr int kStopWriteGraceMs = 5000;
// The longest nap of wait_delivered(): nothing wakes a writer when a pipe
// drains, so it looks again this often (and at once when the reader goes).
constexpr int kDrainPollMs = 20;
constexpr int kDrainSpins = 100;
// Linux's pipe size when nobody asks for another.
constexpr int kDefaultPipeBytes = 65536;

std::string errno_text(int err) {
  return std::strerror(err);
}

Millis steady_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void widen_pipe(int fd) {
  // A pipe holds 64 KiB unless asked: a stage then wakes its reader, and is
  // woken, every 64 KiB. Only a pipe of that default size grows: one sized
  // on purpose stays so. A failure (above /proc/sys/fs/pipe-max-size, or
  // the user's pipe quota spent) leaves the pipe as it was, which works.
  if (::fcntl(fd, F_GETPIPE_SZ) != kDefaultPipeBytes) return;
  (void)::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(kPipeBytes));
}

Output::Output(int fd, std::string name, size_t flush_at)
    : fd_(fd), name_(std::move(name)), flush_at_(flush_at) {
  buf_.reserve(flush_at_ + (flush_at_ >> 1));
  struct stat st {};
  is_pipe_ = ::fstat(fd_, &st) == 0 && S_ISFIFO(st.st_mode);
  if (is_pipe_) widen_pipe(fd_);
}

Output::~Output() {
  tick_ = nullptr;  // what the hook refers to may be gone already
  (void)flush();
  if (nb_fd_ >= 0) ::close(nb_fd_);
  if (owns_fd_) ::close(fd_);
}

Expected<std::unique_ptr<Output>> Output::open_append(const std::string& path) {
  if (path == "-") return std::make_unique<Output>(1);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return failure("cannot open '{}': {}", path, errno_text(errno));
  auto out = std::make_unique<Output>(fd, path);
  out->owns_fd_ = true;
  return out;
}

std::unique_ptr<Output> Output::owning(int fd, std::string name) {
  auto out = std::make_unique<Output>(fd, std::move(name));
  out->owns_fd_ = true;
  return out;
}

Status Output::flush() {
  if (!dropped_.ok()) {
    buf_.clear();
    return dropped_;
  }
  if (!hook_error_.ok()) {
    Status s = std::move(hook_error_);
    hook_error_ = Status();
    return s;
  }
  if (buf_.empty()) return {};
  if (closed_) {
    buf_.clear();
    return {};
  }
  // A hook must not write; what it added anyway waits for the next flush.
  if (in_tick_) return {};
  return write_buffer();
}

Status Output::write_buffer() {
  // Offsets, not pointers: a hook that writes anyway must not make this
  // read freed memory. What it added stays for the next flush.
  const size_t total = buf_.size();
  size_t done = 0;
  size_t left = total;
  // On an early return, what was written must not be written again.
  auto keep_unwritten = [&] { buf_.erase(0, done); };
  int grace_ms = kStopWriteGraceMs;
  while (left > 0) {
    size_t chunk = left;
    int fd = fd_;
    if (stop_ && stop_()) {
      // Asked to stop: a slow reader still gets what is buffered, but a
      // reader that stopped reading must not keep the program alive. A
      // pipe polls writable once PIPE_BUF bytes fit, so writes of at most
      // that much cannot block.
      pollfd pfd{fd_, POLLOUT, 0};
      int ready = ::poll(&pfd, 1, std::min(grace_ms, 100));
      if (ready <= 0) {
        grace_ms -= 100;
        if (grace_ms > 0) continue;
        buf_.clear();
        // Sticky: output was dropped, so no later flush may report success
        // (one that ignored this error, before waiting for input, would
        // otherwise let the program exit 0).
        dropped_ = failure("stopped with {} bytes of output not written: '{}' is not reading", left,
                           name_);
        return dropped_;
      }
      chunk = std::min<size_t>(left, PIPE_BUF);
    } else if (tick_ && is_pipe_) {
      // The hook runs while the reader holds the write up: write without
      // blocking, and wait in poll().
      fd = nonblocking_fd();
      if (fd < 0) {
        fd = fd_;
        pollfd pfd{fd_, POLLOUT, 0};
        if (::poll(&pfd, 1, 0) == 0) {
          Status s = wait_writable();
          if (!s.ok()) {
            keep_unwritten();
            return s;
          }
          continue;
        }
        chunk = std::min<size_t>(left, PIPE_BUF);
      }
    }
    ssize_t n = ::write(fd, buf_.data() + done, chunk);
    if (n >= 0) {
      done += static_cast<size_t>(n);
      left -= static_cast<size_t>(n);
      bytes_written_ += static_cast<uint64_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      Status s = wait_writable();
      if (!s.ok()) {
        keep_unwritten();
        return s;
      }
      continue;
    }
    if (errno == EPIPE) return reader_gone();
    buf_.clear();
    // Sticky, as a stop's: the lines in the buffer are lost, so no later
    // flush may succeed (one that ignored this error, before waiting for
    // input, would let a checkpoint after those lines complete: kpipe(7),
    // CONTROL LINES AND CHECKPOINTS). A full disk stays full.
    dropped_ = failure("cannot write '{}': {}", name_, errno_text(errno));
    return dropped_;
  }
  buf_.erase(0, total);
  return {};
}

int Output::nonblocking_fd() {
  if (nb_fd_ == -1) {
    // Opening the pipe again gives a file description of its own, so that
    // O_NONBLOCK does not change the one this process shares with others
    // (the shell, a process writing into the same pipe).
    std::string path = "/proc/self/fd/" + std::to_string(fd_);
    int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    nb_fd_ = fd >= 0 ? fd : -2;
  }
  return nb_fd_;
}

Status Output::wait_writable() {
  pollfd pfd{fd_, POLLOUT, 0};
  Millis start = steady_ms();
  (void)::poll(&pfd, 1, kTickMs);
  blocked_ms_ += steady_ms() - start;
  return tick();
}

Status Output::tick() {
  if (!tick_ || in_tick_) return {};
  Millis now = steady_ms();
  if (now - last_tick_ < kTickMs) return {};
  last_tick_ = now;
  in_tick_ = true;
  Status s = tick_();
  in_tick_ = false;
  return s;
}

Status Output::reader_gone() {
  closed_ = true;
  buf_.clear();
  // The last chance to settle what the reader took before it went.
  if (!tick_ || in_tick_) return {};
  in_tick_ = true;
  Status s = tick_();
  in_tick_ = false;
  return s;
}

bool Output::check_closed() {
  if (closed_) return true;
  // A pipe's write end polls POLLERR once its read end is closed.
  pollfd pfd{fd_, 0, 0};
  if (::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR) != 0) {
    Status s = reader_gone();
    if (!s.ok() && hook_error_.ok()) hook_error_ = std::move(s);
  }
  return closed_;
}

uint64_t Output::bytes_delivered() const {
  if (!is_pipe_) return bytes_written_;
  int unread = 0;
  if (::ioctl(fd_, FIONREAD, &unread) != 0 || unread <= 0) return bytes_written_;
  // Bytes another process wrote into the same pipe count as ours: the
  // count errs on the side of not delivered.
  return bytes_written_ - std::min<uint64_t>(bytes_written_, static_cast<uint64_t>(unread));
}

Expected<Output::Drain> Output::wait_delivered(uint64_t position, Millis limit) {
  KPIPE_TRY(flush());
  Millis start = steady_ms();
  Millis stop_deadline = -1;
  int nap = 1;
  int spins = 0;
  for (;;) {
    if (bytes_delivered() >= position) return Drain::kDelivered;
    if (closed_ || check_closed()) {
      KPIPE_TRY(flush());  // the hook's error, if any
      return Drain::kClosed;
    }
    Millis now = steady_ms();
    if (stop_ && stop_()) {
      if (stop_deadline < 0) stop_deadline = now + kStopWriteGraceMs;
      if (now >= stop_deadline) return Drain::kStopped;
    }
    if (limit >= 0 && now - start >= limit) return Drain::kTimedOut;
    // A reader on another core usually takes what it was given within
    // microseconds: look again at once a few times before napping.
    if (spins < kDrainSpins) {
      ++spins;
      std::this_thread::yield();
      continue;
    }
    // Nothing wakes a writer when a pipe drains: look again soon. POLLERR
    // (the reader gone) ends the nap at once.
    pollfd pfd{fd_, 0, 0};
    (void)::poll(&pfd, 1, nap);
    blocked_ms_ += steady_ms() - now;
    nap = std::min(nap * 2, kDrainPollMs);
    KPIPE_TRY(tick());
  }
}

Status write_all(int fd, std::string_view bytes, const std::string& name) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n >= 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR || errno == EAGAIN) continue;
    return failure("cannot write '{}': {}", name, errno_text(errno));
  }
  return {};
}

Status wait_for_input(const InputOptions& input, const std::atomic<bool>* stop, int fd) {
  bool reads_stdin = input.inputs.empty() ||
                     std::find(input.inputs.begin(), input.inputs.end(), "-") != input.inputs.end();
  if (!reads_stdin) return {};
  for (;;) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return {};
    pollfd pfd{fd, POLLIN, 0};
    int n = ::poll(&pfd, 1, 200);
    if (n > 0) return {};  // data, its end, or an error the read reports
    if (n < 0 && errno != EINTR)
      return failure("cannot wait for standard input: {}", std::strerror(errno));
  }
}

namespace {

// A look at a pipe's first line: what it holds now, copied by tee(2) into
// a pipe of our own, read from there and dropped. Nothing is consumed.
Expected<std::optional<std::string>> peek_pipe_line(int fd, const std::atomic<bool>* stop) {
  int scratch[2];
  if (::pipe2(scratch, O_CLOEXEC | O_NONBLOCK) != 0) return std::optional<std::string>{};
  struct Closer {
    int* fds;
    ~Closer() {
      ::close(fds[0]);
      ::close(fds[1]);
    }
  } closer{scratch};
  // A first line longer than this is no instance line.
  constexpr size_t kLook = 64 * 1024;
  (void)::fcntl(scratch[1], F_SETPIPE_SZ, static_cast<int>(kLook));
  std::string head;
  for (;;) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed))
      return std::optional<std::string>{};
    head.clear();
    ssize_t n = ::tee(fd, scratch[1], kLook, SPLICE_F_NONBLOCK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd pfd{fd, POLLIN, 0};
      (void)::poll(&pfd, 1, 200);
      continue;
    }
    if (n <= 0) return std::optional<std::string>{};  // ended, or no pipe to look into
    head.resize(static_cast<size_t>(n));
    size_t got = 0;
    while (got < head.size()) {
      ssize_t r = ::read(scratch[0], head.data() + got, head.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    head.resize(got);
    if (size_t nl = head.find('\n'); nl != std::string::npos)
      return std::optional<std::string>{head.substr(0, nl)};
    if (head.size() >= kLook) return std::optional<std::string>{};
    // A line not whole yet: its writer is still writing, or has closed
    // the pipe on an unterminated last line.
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLHUP) != 0)
      return std::optional<std::string>{std::move(head)};
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

Expected<std::optional<InstanceLine>> await_instance(const InputOptions& input,
                                                     const std::atomic<bool>* stop, int fd) {
  KPIPE_TRY(wait_for_input(input, stop, fd));
  bool only_stdin = input.inputs.empty() || (input.inputs.size() == 1 && input.inputs[0] == "-");
  if (!only_stdin) {
    // One file (an instance's output kept for later): its first line.
    if (input.inputs.size() != 1) return std::optional<InstanceLine>{};
    int file = ::open(input.inputs[0].c_str(), O_RDONLY | O_CLOEXEC);
    if (file < 0) return std::optional<InstanceLine>{};  // the read says why
    std::string head(4096, '\0');
    ssize_t n = ::pread(file, head.data(), head.size(), 0);
    ::close(file);
    if (n <= 0) return std::optional<InstanceLine>{};
    head.resize(static_cast<size_t>(n));
    return parse_instance_line(head.substr(0, head.find('\n')));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::optional<InstanceLine>{};
  std::optional<std::string> first;
  if (S_ISFIFO(st.st_mode)) {
    auto peeked = peek_pipe_line(fd, stop);
    if (!peeked) return peeked.take_error();
    first = std::move(*peeked);
  } else if (S_ISREG(st.st_mode)) {
    off_t at = ::lseek(fd, 0, SEEK_CUR);
    std::string head(4096, '\0');
    ssize_t n = at < 0 ? -1 : ::pread(fd, head.data(), head.size(), at);
    if (n > 0) {
      head.resize(static_cast<size_t>(n));
      first = head.substr(0, head.find('\n'));
    }
  }
  if (!first) return std::optional<InstanceLine>{};
  return parse_instance_line(*first);
}

std::string stage_name(const std::string& program, const std::string& name) {
  if (name.empty() || name == program) return program;
  return program + "/" + name;
}

Expected<StatsSettings> parse_stats(const StatsOptions& options, std::string stage) {
  StatsSettings settings;
  settings.stage = std::move(stage);
  if (!options.stats.empty()) {
    auto d = parse_duration(options.stats);
    if (!d) return usage_error("--stats: {}", d.error().message);
    if (*d <= 0) return usage_error("--stats: the interval must be positive");
    settings.interval = *d;
  }
  if (!options.metrics.empty()) {
    std::string path = options.metrics;
    auto slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return usage_error("--metrics '{}': no folder '{}'", path, dir);
    settings.metrics = path;
    settings.write_metrics = [path](std::string_view text) {
      return write_file_atomically(path, text);
    };
  }
  return settings;
}

Status write_file_atomically(const std::string& path, std::string_view text) {
  // Beside the file, so that the rename stays on one filesystem; a name
  // node_exporter's textfile collector skips (it reads *.prom only).
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return failure("cannot write '{}': {}", tmp, std::strerror(errno));
  Status s = write_all(fd, text, tmp);
  ::close(fd);
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    s = failure("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno));
  // A failed write leaves nothing behind: not a half-written file, nor one
  // that a later run (a --metrics naming a folder, every 5 s) would find.
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

Status check_inputs_are_not_outputs(
    const std::vector<std::string>& inputs,
    const std::vector<std::pair<std::string, const Output*>>& outputs) {
  for (const auto& [option, out] : outputs) {
    struct stat o {};
    // Only a regular file can be read back: a pipe or a terminal cannot.
    if (out == nullptr || ::fstat(out->fd(), &o) != 0 || !S_ISREG(o.st_mode)) continue;
    std::vector<std::string> all = inputs.empty() ? std::vector<std::string>{"-"} : inputs;
    for (const std::string& in : all) {
      struct stat i {};
      int r = in == "-" ? ::fstat(0, &i) : ::stat(in.c_str(), &i);
      if (r != 0 || i.st_dev != o.st_dev || i.st_ino != o.st_ino) continue;
      std::string name = in == "-" ? "<stdin>" : "'" + in + "'";
      return usage_error("input {} is also {}: the program would read what it writes", name,
                         option);
    }
  }
  return {};
}

}  // namespace kpipe
