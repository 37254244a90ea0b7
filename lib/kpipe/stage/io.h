// NDJSON out over file descriptors, buffered, and the line that readers
// (LineFeed) hand out: a view into a large padded buffer, so that simdjson
// parses it in place.
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
