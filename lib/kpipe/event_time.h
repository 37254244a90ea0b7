// Event times read from records (kpipe(7), TIMES AND DURATIONS): a number of
// --time-unit units since the epoch, or an RFC 3339 string. Every program
// that takes a time from a field (kwindow, kdedup, kdlq guard's :time) reads it
// here, so that they agree on what a time is. Pure.
#pragma once

#include <string_view>

#include "kpipe/json.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// How a program words a field that holds no time. The programs worded it
// their own ways before they shared this reader, and scripts match their
// diagnostics, so each keeps its words.
struct TimeFieldWording {
  // What a field of another type is said not to be:
  // "field '.ts' is a bool, not a time".
  std::string_view expected = "a time";
  // A number or a string that is no time: "field '.ts': why", or with this
  // set, "field '.ts' is not a time: why".
  bool says_not_a_time = false;
};

// The time in `field` as epoch milliseconds, numbers read in `unit`. A
// data_error naming `path` when the field is missing, of another type, or
// not a time (a bad date, a number out of range), or a time outside what
// RFC 3339 can write (kMinTime to kMaxTime, time.h).
Expected<Millis> read_event_time(const JsonField& field, std::string_view path, TimeUnit unit,
                                 const TimeFieldWording& wording = {});

}  // namespace kpipe
