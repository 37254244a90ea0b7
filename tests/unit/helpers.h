// Small fixtures shared by the unit tests: padded lines, temporary files,
// pipes. Not a test file itself (the CMake glob takes *_test.cpp only).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kpipe/stage/io.h"

namespace kpipe::test {

// A line followed by kJsonPadding readable bytes, as LineFeed hands out.
// The padding is deliberately not zeros, so that a reader that looks past
// the end of the line sees garbage rather than a friendly terminator.
class Padded {
 public:
  explicit Padded(std::string_view text) : buf_(text) { buf_.append(kJsonPadding, 'x'); }
  std::string_view view() const {
    return std::string_view(buf_.data(), buf_.size() - kJsonPadding);
  }
  operator std::string_view() const { return view(); }  // NOLINT: a test convenience

 private:
  std::string buf_;
};

// A directory under $TMPDIR removed (with its files) when the test ends.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/kpipe-unit-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() { (void)std::system(("rm -rf '" + path_ + "'").c_str()); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }
  // Writes `bytes` to a new file and returns its path.
  std::string write(std::string_view name, std::string_view bytes) const {
    std::string p = file(name);
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("cannot create " + p);
    write_fd(fd, bytes);
    ::close(fd);
    return p;
  }

  static void write_fd(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::write(fd, bytes.data(), bytes.size());
      if (n < 0) throw std::runtime_error("write failed");
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }

 private:
  std::string path_;
};

// A string literal's bytes, NULs included, without counting them by hand.
template <size_t N>
std::string bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

inline std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Both ends of a pipe, closed when the test ends unless taken.
struct Pipe {
  int read_end = -1;
  int write_end = -1;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    read_end = fds[0];
    write_end = fds[1];
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  void close_read() {
    if (read_end >= 0) ::close(read_end);
    read_end = -1;
  }
  void close_write() {
    if (write_end >= 0) ::close(write_end);
    write_end = -1;
  }
};

}  // namespace kpipe::test
