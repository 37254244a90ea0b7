// The loop every NDJSON program shares: read lines from the inputs, skip
// empty ones, hand control lines and data lines to a stage, apply
// --on-error to bad ones, flush before waiting, stop cleanly on a signal,
// and keep the counters behind --stats.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/report.h"
#include "kpipe/stage/bad_input.h"
#include "kpipe/stage/io.h"
#include "kpipe/stage/line_feed.h"
#include "kpipe/stats.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

class LineStage {
 public:
  virtual ~LineStage() = default;
  // A data line. A data_error means the line is bad input: the driver
  // applies --on-error with its message. The stage must not have written
  // anything for a line it refuses.
  virtual Status on_line(const Line& line, Output& out) = 0;
  // The paths the stage reads from every data line, or null. With them,
  // the driver parses each data line, on another core ahead of the stage
  // when it can, and calls on_parsed instead of on_line.
  virtual const FieldSet* fields() const { return nullptr; }
  virtual Status on_parsed(const Line& line, const ParsedLine& parsed, Output& out) {
    (void)parsed;
    return on_line(line, out);
  }
  // A control line. The default forwards it unchanged.
  virtual Status on_control(const Line& line, Output& out) {
    out.write_line(line.text);
    return {};
  }
  // Called before the driver reads input that may not be there yet: a
  // stage that holds a record back (kdedup decides each line when the next
  // arrives, to hide a cache miss) writes it now, so that output is
  // complete before the program waits (kpipe(7), LINES).
  virtual Status before_wait(Output& out) {
    (void)out;
    return {};
  }
  // Called about every `idle_interval()` while no input arrives.
  virtual Status on_idle(Output& out) {
    (void)out;
    return {};
  }
  virtual Millis idle_interval() const { return 200; }
  // At the end of input (or on a stop signal).
  virtual Status on_end(Output& out) {
    (void)out;
    return {};
  }
  virtual void fill_counters(Counters& c) const { (void)c; }
};

// A stage whose work on a line starts from fixed paths (fields()): it
// implements on_parsed, and on_line parses here, for callers that hand it
// lines one by one.
class ParsingStage : public LineStage {
 public:
  Status on_line(const Line& line, Output& out) final;

 private:
  JsonReader reader_;
  std::vector<JsonField> values_;
  ParsedLine parsed_;
};

struct FilterSettings {
  FilterSettings() = default;
  FilterSettings(InputOptions in, StatsSettings s) : input(std::move(in)), stats(std::move(s)) {}

  InputOptions input;
  StatsSettings stats;
  // Files the stage writes besides standard output (kdedup --dups, kwindow
  // --late), each with what it is ("the --dups file"): none may be an input.
  std::vector<std::pair<std::string, const Output*>> outputs;
};

Status run_filter(LineStage& stage, const FilterSettings& settings, BadInputHandler& bad, Io& io);

}  // namespace kpipe
