#include "kpipe/io.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace kpipe {

namespace {

constexpr size_t kInitialReadBuffer = 1u << 20;
// How long a program asked to stop waits for a reader that does not read.
constexpr int kStopWriteGraceMs = 5000;

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

LineReader::LineReader(int fd, std::string name, size_t max_line_bytes)
    : fd_(fd),
      name_(std::move(name)),
      max_line_bytes_(max_line_bytes),
      buf_(new char[kInitialReadBuffer + kJsonPadding]),
      cap_(kInitialReadBuffer) {
  std::memset(buf_.get() + cap_, 0, kJsonPadding);
}

LineReader::~LineReader() {
  if (owns_fd_) ::close(fd_);
}

Expected<std::unique_ptr<LineReader>> LineReader::open(const std::string& path,
                                                       size_t max_line_bytes) {
  if (path == "-") return std::make_unique<LineReader>(0, "<stdin>", max_line_bytes);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failure("cannot open '{}': {}", path, errno_text(errno));
  auto reader = std::make_unique<LineReader>(fd, path, max_line_bytes);
  reader->owns_fd_ = true;
  return reader;
}

Expected<bool> LineReader::next(Line& line) {
  for (;;) {
    char* base = buf_.get();
    size_t avail = end_ - begin_;
    if (scanned_ < avail) {
      auto* nl = static_cast<char*>(std::memchr(base + begin_ + scanned_, '\n', avail - scanned_));
      if (nl != nullptr) {
        size_t len = static_cast<size_t>(nl - (base + begin_));
        line.text = std::string_view(base + begin_, len);
        begin_ += len + 1;
        scanned_ = 0;
        break;
      }
      scanned_ = avail;
    }
    if (eof_) {
      // After a stop, bytes without their newline are part of a record
      // still on its way, not a last line.
      if (avail == 0 || stopped_) return false;
      // A last line without its newline.
      line.text = std::string_view(base + begin_, avail);
      begin_ = end_;
      scanned_ = 0;
      break;
    }
    if (begin_ > 0) {
      std::memmove(base, base + begin_, avail);
      end_ = avail;
      begin_ = 0;
    }
    if (end_ == cap_) {
      // One line fills the buffer: grow it, so that even a line longer than
      // max_line_bytes reaches its dead-letter store whole.
      size_t cap = cap_ * 2;
      std::unique_ptr<char[]> bigger(new char[cap + kJsonPadding]);
      std::memcpy(bigger.get(), base, end_);
      std::memset(bigger.get() + cap, 0, kJsonPadding);
      buf_ = std::move(bigger);
      cap_ = cap;
    }
    auto got = fill();
    if (!got) return got.take_error();
    if (*got == 0) eof_ = true;
  }
  if (!line.text.empty() && line.text.back() == '\r') line.text.remove_suffix(1);
  line.number = ++line_number_;
  line.input = name_;
  line.too_long = line.text.size() > max_line_bytes_;
  return true;
}

Expected<size_t> LineReader::fill() {
  if (before_read_) before_read_();
  for (;;) {
    if (stop_ && stop_()) {
      stopped_ = true;
      return size_t{0};
    }
    if (idle_hook_) {
      // Wait in slices, so that a signal or an idle deadline is noticed even
      // when no input comes.
      pollfd pfd{fd_, POLLIN, 0};
      int ready = ::poll(&pfd, 1, idle_ms_);
      if (ready < 0 && errno != EINTR) return failure("{}: poll: {}", name_, errno_text(errno));
      if (ready <= 0) {
        KPIPE_TRY(idle_hook_());
        continue;
      }
    }
    ssize_t n = ::read(fd_, buf_.get() + end_, cap_ - end_);
    if (n >= 0) {
      end_ += static_cast<size_t>(n);
      bytes_read_ += static_cast<uint64_t>(n);
      return static_cast<size_t>(n);
    }
    if (errno == EINTR || errno == EAGAIN) continue;
    return failure("cannot read '{}': {}", name_, errno_text(errno));
  }
}

InputList::InputList(std::vector<std::string> paths, size_t max_line_bytes)
    : paths_(std::move(paths)), max_line_bytes_(max_line_bytes) {
  if (paths_.empty()) paths_.push_back("-");
}

const std::string& InputList::name() const {
  static const std::string kNone = "<stdin>";
  return current_ ? current_->name() : kNone;
}

Expected<bool> InputList::next(Line& line) {
  for (;;) {
    if (!current_) {
      if (index_ >= paths_.size()) return false;
      auto reader = LineReader::open(paths_[index_], max_line_bytes_);
      if (!reader) return reader.take_error();
      current_ = std::move(*reader);
      current_->set_before_read(before_read_);
      current_->set_stop_check(stop_);
      if (idle_hook_) current_->set_idle_hook(idle_ms_, idle_hook_);
    }
    auto got = current_->next(line);
    if (!got || *got) return got;
    if (stop_ && stop_()) return false;
    // Keep the finished reader's name for diagnostics until the next opens.
    ++index_;
    if (index_ >= paths_.size()) return false;
    current_.reset();
  }
}

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

}  // namespace kpipe
