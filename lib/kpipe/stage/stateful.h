// What every stateful stage (kwindow, kdedup, the planned kjoin) does the
// same way around its engine (kpipe(7), CONTROL LINES AND CHECKPOINTS):
// restore the engine's state at start, save what changed at each
// checkpoint line before forwarding it, and key records by the values at
// their --key paths. The engine keeps its state as Snapshottable entries
// (snapshot.h); where the entries go is a SnapshotStore, so that this
// layer needs no SQLite (programs/state_file.h opens the pipeline's state
// file as one, tests use a fake).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/json.h"
#include "kpipe/line.h"
#include "kpipe/snapshot.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// Where stages keep their snapshots, each under its stage's name.
class SnapshotStore {
 public:
  virtual ~SnapshotStore() = default;
  // Saves `changes` as the stage's snapshot for `checkpoint`.
  virtual Status save_snapshot(std::string_view stage, int64_t checkpoint,
                               const StateChanges& changes, Millis now) = 0;
  // Hands `engine` the stage's entries as of the newest complete
  // checkpoint, then calls its finish_restore(); an error from either
  // leaves the store as it was. Returns the checkpoint restored (nullopt:
  // none).
  virtual Expected<std::optional<int64_t>> restore(std::string_view stage,
                                                   Snapshottable& engine) = 0;
};

// The format of a stage's entries, kept beside them when the entries alone
// would not tell: a stage whose entries change meaning (kdedup's keys of
// several paths did) refuses a state it would restore without error and
// then silently fail to match.
struct StateFormat {
  // Saved with the stage's first snapshot of a run; empty: no marker.
  std::string marker;
  // Why a state saved before the stage kept a marker cannot be restored,
  // ending "the saved state of 'STAGE' ...": empty when it can.
  std::string unmarked_refusal;
  // The options that decide what the entries mean, as the command line
  // says them ("--key .id"), saved with the first snapshot of a run. A
  // state saved with other options is refused, naming those that differ;
  // one saved before its options were kept is restored (and then gets
  // them). Empty: none are kept.
  std::vector<std::string> options;
};

// The entries that hold a StateFormat's marker and options. Engines' keys
// never start with '!' (kdedup's: m, h, x; kwindow's: meta, p/, b/, w/).
inline constexpr std::string_view kStateFormatKey = "!format";
inline constexpr std::string_view kStateOptionsKey = "!options";

// A stage's state between its engine and the store.
class StageState {
 public:
  // `store` null: the stage runs without --state, restores nothing and
  // does not read checkpoint lines.
  StageState(SnapshotStore* store, std::string stage, Snapshottable& engine, Clock& clock,
             StateFormat format = {});

  bool enabled() const { return store_ != nullptr; }
  const std::string& stage() const { return stage_; }

  // Restores the engine from the newest complete checkpoint; the
  // checkpoint restored, nullopt when there was none or no store. A state
  // of another format is refused (a failure that says what to do).
  Expected<std::optional<int64_t>> restore();

  // For a control line, before the stage forwards it: a checkpoint saves
  // what changed since the previous one, so that the snapshot holds every
  // record before the line and only those. A malformed checkpoint line is
  // a data_error naming the line.
  Status on_control(const Line& line);

 private:
  class Restoring;

  SnapshotStore* store_;
  std::string stage_;
  Snapshottable& engine_;
  Clock& clock_;
  StateFormat format_;
  bool marker_saved_ = false;   // the store holds format_.marker live
  bool options_saved_ = false;  // the store holds format_.options live
  StateChanges changes_;
};

// The key of a record, from the values at `slots` of `fields` (its --key
// paths): the JSON text of the value for one path, a JSON array of the
// values for several ("[\"eu\",7]": 1 and 23 are not 12 and 3). Equal
// values written alike share a key: objects and arrays are minified, a
// string with escapes is written in one form ("\u0061" as "a"); any other
// value is its text as it appears, returned without a copy for one path.
// The view points into `buffer` or into the line. A data_error when a path
// is missing.
Expected<std::string_view> encode_key(const FieldSet& fields, std::span<const size_t> slots,
                                      const JsonField* values, std::string& buffer);

// The key kjoin joins on (kjoin(1), KEYS): for one path, the bytes that
// kproduce --key makes a Kafka record's key of (record_key_bytes), so that
// a stream's field matches a table topic's keys; for several, encode_key's
// JSON array. nullopt for a null key, which no row has.
Expected<std::optional<std::string_view>> join_key(const FieldSet& fields,
                                                   std::span<const size_t> slots,
                                                   const JsonField* values, std::string& buffer);

}  // namespace kpipe
