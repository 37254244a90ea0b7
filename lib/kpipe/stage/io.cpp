#include "kpipe/stage/io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace kpipe {

namespace {

// How long a program asked to stop waits for a reader that does not read.
constexpr int kStopWriteGraceMs = 5000;

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

Output::Output(int fd, std::string name, size_t flush_at)
    : fd_(fd), name_(std::move(name)), flush_at_(flush_at) {
  buf_.reserve(flush_at_ + (flush_at_ >> 1));
}

Output::~Output() {
  (void)flush();
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

Status Output::flush() {
  if (buf_.empty()) return {};
  if (closed_) {
    buf_.clear();
    return {};
  }
  const char* p = buf_.data();
  size_t left = buf_.size();
  int grace_ms = kStopWriteGraceMs;
  while (left > 0) {
    size_t chunk = left;
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
        return failure("stopped with {} bytes of output not written: '{}' is not reading", left, name_);
      }
      chunk = std::min<size_t>(left, PIPE_BUF);
    }
    ssize_t n = ::write(fd_, p, chunk);
    if (n >= 0) {
      p += n;
      left -= static_cast<size_t>(n);
      bytes_written_ += static_cast<uint64_t>(n);
      continue;
    }
    if (errno == EINTR || errno == EAGAIN) continue;
    buf_.clear();
    if (errno == EPIPE) {
      closed_ = true;
      return {};
    }
    return failure("cannot write '{}': {}", name_, errno_text(errno));
  }
  buf_.clear();
  return {};
}

bool Output::check_closed() {
  if (closed_) return true;
  // A pipe's write end polls POLLERR once its read end is closed.
  pollfd pfd{fd_, 0, 0};
  if (::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR) != 0) {
    closed_ = true;
    buf_.clear();
  }
  return closed_;
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

std::string stage_name(const std::string& program, const std::string& name) {
  if (name.empty() || name == program) return program;
  return program + "/" + name;
}

Expected<Millis> parse_stats_interval(const StatsOptions& options) {
  if (options.stats.empty()) return Millis{0};
  auto d = parse_duration(options.stats);
  if (!d) return usage_error("--stats: {}", d.error().message);
  if (*d <= 0) return usage_error("--stats: the interval must be positive");
  return *d;
}

Status check_inputs_are_not_outputs(const std::vector<std::string>& inputs,
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
