// The line that readers (stage/line_feed.h) hand out: a view into a large
// padded buffer, so that simdjson parses it in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

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
  // Longer than the reader's max_line_bytes: bad input (kpipe(7), BAD INPUT). The
  // text is still whole, so a dead-letter store gets it byte for byte.
  bool too_long = false;
};

// A line kept past the reader's next one (by a stage that decides it a
// few lines later, or a record held in its state): its bytes followed by
// kJsonPadding zero bytes, so that it parses in place and a dead letter's
// reader can take it, with its number and input. The buffer is reused.
class HeldLine {
 public:
  void assign(std::string_view text, uint64_t number, std::string_view input) {
    size_ = text.size();
    if (buf_.size() < size_ + kJsonPadding) buf_.resize(2 * size_ + kJsonPadding);
    if (size_ > 0) std::memcpy(buf_.data(), text.data(), size_);
    std::memset(buf_.data() + size_, 0, kJsonPadding);
    number_ = number;
    if (input_ != input) input_.assign(input);
  }
  void assign(const Line& line) { assign(line.text, line.number, line.input); }

  std::string_view text() const { return {buf_.data(), size_}; }
  const std::string& input() const { return input_; }
  Line line() const {
    Line l;
    l.text = text();
    l.number = number_;
    l.input = input_;
    return l;
  }

 private:
  std::string buf_;
  size_t size_ = 0;
  uint64_t number_ = 0;
  std::string input_;
};

}  // namespace kpipe
