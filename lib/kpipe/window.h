// Event-time windows (kwindow(1)): records are grouped per key into
// tumbling, sliding or session windows; a watermark that trails the event
// times decides when a window is complete, fires it once, and later frees
// its state, so that memory is bounded by the watermark and the live keys,
// never by the length of the stream.
//
// Pure: no I/O, no Kafka, no SQLite. Processing time (for --idle-timeout)
// comes from an injected Clock, output goes to a string, and the state is
// Snapshottable so that the checkpoint protocol can save it incrementally.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/json.h"
#include "kpipe/report.h"
#include "kpipe/snapshot.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

enum class WindowKind { kTumble, kSlide, kSession };

struct WindowShape {
  WindowKind kind = WindowKind::kTumble;
  Millis size = 0;   // tumble and slide: the window's length; session: the gap
  Millis every = 0;  // slide: windows start at multiples of this
};

enum class AggFn { kCount, kSum, kMin, kMax, kAvg, kDistinct };

struct AggSpec {
  std::string name;  // the output field
  AggFn fn = AggFn::kCount;
  std::string path;  // the input field's path as written; empty for count
};

// "count", "sum:.value.amount", "total=sum:.value.amount". The default name
// is the function for count, else FUNCTION_LASTKEY ("sum_amount").
Expected<AggSpec> parse_agg_spec(std::string_view text);

// Whether sum and avg read this number's text (JsonField::raw): only one
// that may be an integer beyond 64 bits, which they add exactly. A caller
// that keeps a record's fields may drop the text of every other number.
inline bool sum_reads_text(const JsonField& f) {
  return !f.is_integer && std::fabs(f.number) >= 0x1p63;
}

enum class TimeFormat { kRfc3339, kMillis };

struct WindowConfig {
  WindowShape shape;
  Millis watermark_delay = 0;
  Millis allowed_lateness = 0;
  Millis idle_timeout = 0;  // 0: a partition is never idle
  std::vector<AggSpec> aggs;
  // The --key paths: whether the output has "key", and part of what a
  // saved state must agree with.
  std::vector<std::string> keys;
  TimeFormat time_format = TimeFormat::kRfc3339;
  // The --time path, for messages only.
  std::string time_path;
  // Keep track of what changed for take_changes() (only with --state: the
  // bookkeeping costs a little on every record).
  bool track_changes = false;
};

// Checks what the stage cannot check field by field: durations, sizes,
// aggregate names. Errors are usage errors.
Status validate_window_config(const WindowConfig& config);

// One record, as the stage read it. Views stay valid for the call only.
struct WindowInput {
  Millis time = 0;
  // The key's JSON text (`"u1"`, `[1,"a"]`); empty without --key. Records
  // with the same text have the same key.
  std::string_view key;
  // Where the record came from, when it says (envelopes): each partition
  // has its own watermark. partition < 0: the record names none.
  std::string_view topic;
  int64_t partition = -1;
  // One per aggregate, in the order of WindowConfig::aggs; count's entry
  // is not read and may be null.
  const JsonField* const* aggs = nullptr;
};

enum class Placement {
  kOnTime,   // into at least one window that has not fired
  kLate,     // only into windows behind the watermark, fired again at once
  kTooLate,  // every window of the record was already freed: for --late
};

constexpr Millis kNoWatermark = std::numeric_limits<Millis>::min();

class WindowEngine final : public Snapshottable {
 public:
  // `reporter`, when given, is told once of a sum that cannot be written
  // exactly (kwindow(1), Aggregates).
  WindowEngine(WindowConfig config, Clock& clock, Reporter* reporter = nullptr);
  ~WindowEngine() override;
  WindowEngine(const WindowEngine&) = delete;
  WindowEngine& operator=(const WindowEngine&) = delete;

  // Places the record against the current watermark (appending a "late"
  // line for each window behind it), then advances the watermark and
  // appends the lines of the windows that close, in order of end. An
  // aggregate input of the wrong type is a data_error, and then nothing
  // has changed.
  Expected<Placement> add(const WindowInput& in, std::string& out);

  // For a caller that holds a record back to overlap its memory accesses
  // with reading the next line: the data errors add() would return, and
  // where add() would place the record if it came now (nullopt for
  // sessions, which cannot tell without the key's state). placement() also
  // starts fetching the memory that add() will touch.
  Status check(const WindowInput& in) const;
  std::optional<Placement> placement(const WindowInput& in) const;
  // Whether a window the record falls into already holds its key (for
  // sessions: whether the key has a session): how kwindow tells that a
  // key came from two partitions.
  bool holds_key(const WindowInput& in) const;

  // Processing time passed without input: partitions idle for
  // --idle-timeout stop holding the watermark back.
  void on_idle(std::string& out);

  // What kconsume --announce says of its partitions (control.h): an
  // assigned partition that has sent nothing yet holds the watermark where
  // it is until its first record (or until --idle-timeout finds it idle);
  // a revoked partition no longer holds it. Without these, a partition
  // counts from its first record on, so reading a backlog one partition at
  // a time would let the first run the watermark ahead of the others.
  // (A partition that is merely caught up keeps holding the watermark at
  // its last record: new records may still come to it, older than another
  // partition's, and only time can tell that it went quiet.)
  void partition_assigned(std::string_view topic, int64_t partition, std::string& out);
  void partition_revoked(std::string_view topic, int64_t partition, std::string& out);

  // End of input: every window that has not fired fires, in order of end.
  void flush(std::string& out);

  Millis watermark() const;
  // Window-and-key aggregates held.
  uint64_t states() const;
  // Lines appended so far.
  uint64_t emitted() const;

  // Snapshottable. Keys: "meta", "p/PARTITION/TOPIC" (a partition's
  // largest event time), "w/START/KEY" (one window of one key).
  void take_changes(StateChanges& out) override;
  Status restore_entry(std::string_view key, std::string_view value) override;
  Status finish_restore() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kpipe
