// The line that readers (stage/line_feed.h) hand out: a view into a large
// padded buffer, so that simdjson parses it in place.
#pragma once

#include <cstddef>
#include <cstdint>
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

}  // namespace kpipe
