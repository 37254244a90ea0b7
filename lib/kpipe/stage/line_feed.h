// The inputs of a filter, read on a thread of their own a chunk at a time,
// with each data line's fields parsed ahead of the stage that uses them.
// On a second core, reading and parsing overlap the stage's work on earlier
// lines; parsing is the larger half of a stage such as kwindow, so both
// cores parse and one of them also runs the stage. The stage still sees
// every line in order, with its number and input.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/json.h"
#include "kpipe/stage/io.h"
#include "kpipe/status.h"

namespace kpipe {

// A data line's fields, as JsonReader::read gave them. Views point into the
// line or the feed's own buffers and stay valid until the next call.
struct ParsedLine {
  Status status;  // a data_error when the line is not JSON that the paths can read
  const JsonField* values = nullptr;  // one per slot of the FieldSet
  JsonType root_type = JsonType::kMissing;
};

// Empty lines and lines of blanks only are not records (kpipe(7), LINES).
bool is_blank_line(std::string_view text);

class LineFeed {
 public:
  // `fields` may be null: lines are then only read. It must outlive the
  // feed. No thread starts before the first next().
  LineFeed(std::vector<std::string> paths, size_t max_line_bytes, const FieldSet* fields);
  ~LineFeed();
  LineFeed(const LineFeed&) = delete;
  LineFeed& operator=(const LineFeed&) = delete;

  // The next line, false at the end of the inputs or once the stop check
  // holds. `parsed` is set for a line that is not blank, not a control line,
  // not too long, when the feed has fields; else null.
  Expected<bool> next(Line& line, const ParsedLine*& parsed);

  // Called before waiting for input that is not there yet, so that output
  // is complete before the program waits (kpipe(7), LINES).
  void set_before_wait(std::function<void()> hook) { before_wait_ = std::move(hook); }
  // When this returns true, next() reports the end of input instead of
  // waiting for more (SIGINT and SIGTERM, or a closed downstream pipe).
  void set_stop_check(std::function<bool()> stop) { stop_ = std::move(stop); }
  // While no input comes, calls `hook` about every `every_ms` milliseconds.
  // An error from the hook is returned by next().
  void set_idle_hook(int every_ms, std::function<Status()> hook) {
    idle_ms_ = every_ms;
    idle_hook_ = std::move(hook);
  }

 private:
  struct Shared;
  std::unique_ptr<Shared> shared_;
  std::function<void()> before_wait_;
  std::function<bool()> stop_;
  int idle_ms_ = 200;
  std::function<Status()> idle_hook_;
};

}  // namespace kpipe
