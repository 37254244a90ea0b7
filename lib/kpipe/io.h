// NDJSON in and out over file descriptors: large reads into one padded
// buffer, lines handed out as views into it, no system call per line and no
// iostreams. The padding lets simdjson parse a line in place.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/status.h"

namespace kpipe {

constexpr size_t kDefaultMaxLineBytes = 16u << 20;
// simdjson reads up to this many bytes past the end of a document.
constexpr size_t kJsonPadding = 64;

struct Line {
  // Without the '\n' and a trailing '\r'. At least kJsonPadding readable
  // bytes follow text.end().
  std::string_view text;
  uint64_t number = 0;  // 1-based, per input
  // The input's name ("<stdin>" or a path), for a stage that sends a line
  // to the dead-letter store itself (kwindow --late dlq, kdedup --dups dlq).
  std::string_view input;
  // Longer than the reader's max_line_bytes: bad input (CONTRACT §7). The
  // text is still whole, so a dead-letter store gets it byte for byte.
  bool too_long = false;
};

class LineReader {
 public:
  // `name` is how diagnostics call the input: "<stdin>" or a path.
  LineReader(int fd, std::string name, size_t max_line_bytes = kDefaultMaxLineBytes);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Opens a path, or standard input for "-".
  static Expected<std::unique_ptr<LineReader>> open(const std::string& path,
                                                    size_t max_line_bytes = kDefaultMaxLineBytes);

  // The next line, false at end of input. The view stays valid until the
  // next call. Empty lines are returned too (callers skip them, but they
  // still count as lines).
  Expected<bool> next(Line& line);

  // Called before a read that may block, so that output is flushed before
  // the program waits for more input (CONTRACT §2).
  void set_before_read(std::function<void()> hook) { before_read_ = std::move(hook); }
  // When this returns true, next() reports the end of input instead of
  // waiting for more (SIGINT and SIGTERM, or a closed downstream pipe).
  void set_stop_check(std::function<bool()> stop) { stop_ = std::move(stop); }
  // While waiting for input, calls `hook` every `every_ms` milliseconds, so
  // that time-driven work (batch deadlines, idle partitions) happens on a
  // quiet stream. An error from the hook is returned by next().
  void set_idle_hook(int every_ms, std::function<Status()> hook) {
    idle_ms_ = every_ms;
    idle_hook_ = std::move(hook);
  }

  const std::string& name() const { return name_; }
  uint64_t line_number() const { return line_number_; }
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  Expected<size_t> fill();

  int fd_;
  bool owns_fd_ = false;
  std::string name_;
  size_t max_line_bytes_;
  std::unique_ptr<char[]> buf_;
  size_t cap_;          // usable bytes, padding excluded
  size_t begin_ = 0;    // first unconsumed byte
  size_t end_ = 0;      // one past the last byte read
  size_t scanned_ = 0;  // bytes after begin_ known to hold no '\n'
  bool eof_ = false;
  bool stopped_ = false;  // eof_ came from the stop check, not the input
  uint64_t line_number_ = 0;
  uint64_t bytes_read_ = 0;
  std::function<void()> before_read_;
  std::function<bool()> stop_;
  int idle_ms_ = -1;
  std::function<Status()> idle_hook_;
};

// Reads the inputs named on a command line in order: files, "-" for
// standard input, standard input when there are none.
class InputList {
 public:
  InputList(std::vector<std::string> paths, size_t max_line_bytes = kDefaultMaxLineBytes);

  Expected<bool> next(Line& line);
  // The name of the input the last line came from.
  const std::string& name() const;

  void set_before_read(std::function<void()> hook) { before_read_ = std::move(hook); }
  void set_stop_check(std::function<bool()> stop) { stop_ = std::move(stop); }
  void set_idle_hook(int every_ms, std::function<Status()> hook) {
    idle_ms_ = every_ms;
    idle_hook_ = std::move(hook);
  }

 private:
  std::vector<std::string> paths_;
  size_t max_line_bytes_;
  size_t index_ = 0;
  std::unique_ptr<LineReader> current_;
  std::function<void()> before_read_;
  std::function<bool()> stop_;
  int idle_ms_ = -1;
  std::function<Status()> idle_hook_;
};

// A buffered writer. A closed downstream pipe (EPIPE) is a normal end:
// closed() turns true and writes are dropped, so callers stop quietly.
class Output {
 public:
  explicit Output(int fd, std::string name = "<stdout>", size_t flush_at = 1u << 16);
  ~Output();
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  // Opens (creating or appending) a file, or standard output for "-".
  static Expected<std::unique_ptr<Output>> open_append(const std::string& path);

  // The buffer, for writers that build a record in place.
  std::string& buffer() { return buf_; }
  void write(std::string_view bytes) { buf_.append(bytes); }
  void write_line(std::string_view bytes) {
    buf_.append(bytes);
    buf_.push_back('\n');
  }
  // Flushes when enough has accumulated; call after each record.
  Status end_record() { return buf_.size() >= flush_at_ ? flush() : Status(); }
  Status flush();

  // Once this returns true (SIGINT, SIGTERM), a reader that stopped
  // reading gets a grace period, then flush() gives up instead of waiting
  // forever on a full pipe.
  void set_stop_check(std::function<bool()> stop) { stop_ = std::move(stop); }

  bool closed() const { return closed_; }
  // Checks, without writing, whether the reader of a pipe has gone (so
  // that a program waiting for input notices `| head` ending). Sets
  // closed() when it has.
  bool check_closed();
  uint64_t bytes_written() const { return bytes_written_; }
  const std::string& name() const { return name_; }

 private:
  int fd_;
  bool owns_fd_ = false;
  std::string name_;
  size_t flush_at_;
  std::string buf_;
  bool closed_ = false;
  uint64_t bytes_written_ = 0;
  std::function<bool()> stop_;
};

// Writes all of `bytes` to `fd`, retrying short writes and EINTR.
Status write_all(int fd, std::string_view bytes, const std::string& name);

}  // namespace kpipe
