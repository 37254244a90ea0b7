// What every stateful stage (kwindow, kdedup, kjoin) does the
// same way around its engine (kpipe(7), CONTROL LINES AND CHECKPOINTS):
// restore the engine's state at start, save what changed at each
// checkpoint line before forwarding it, and key records by the values at
// their --key paths. The engine keeps its state as Snapshottable entries
// (snapshot.h); where the entries go is a SnapshotStore, so that this
// layer needs no database (programs/stage_state.h opens the pipeline's
// state store as one, tests use a fake).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/control.h"
#include "kpipe/json.h"
#include "kpipe/key_sample.h"
#include "kpipe/line.h"
#include "kpipe/snapshot.h"
#include "kpipe/stage/checkpoint_meter.h"
#include "kpipe/stage/key_sampler.h"
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
  // When the pipeline is an instance of a consumer group (kpipe(7), MANY
  // INSTANCES): saves the changes of each partition under its owner's
  // epoch, refused whole (fenced) when another instance took one over.
  virtual Status save_slices(std::string_view stage, int64_t checkpoint,
                             const std::vector<SliceChanges>& slices, Millis now) = 0;
  // Hands `engine` one partition's entries as of the checkpoint that last
  // completed it, then calls its finish_restore(). Returns that checkpoint
  // (nullopt: nothing saved).
  virtual Expected<std::optional<int64_t>> restore_slice(std::string_view stage,
                                                         const TopicPartition& partition,
                                                         Snapshottable& engine) = 0;
  // The run of the instance's kconsume the stage's instance line names
  // (await_instance), before restore(): the stage's name is then locked
  // within that instance too (kpipe(7), MANY INSTANCES).
  virtual void set_pipeline(std::string_view pipeline) { (void)pipeline; }
  // An instance's sampled keys of `stage` (each with its partition), after
  // save_slices() saved checkpoint `checkpoint`: records them where every
  // instance's are, and returns one that was recorded under another
  // partition of `topics`, by any instance (kpipe(7), MANY INSTANCES).
  // None by default: a store of one process sees nothing more than the
  // stage.
  virtual Expected<std::optional<KeySplit>> record_key_samples(
      std::string_view stage, int64_t checkpoint, const std::vector<KeySample>& samples,
      const std::vector<std::string>& topics) {
    (void)stage, (void)checkpoint, (void)samples, (void)topics;
    return std::optional<KeySplit>{};
  }
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

// The options entry's value: a JSON array of the options' strings; nullopt
// for a value that is not one.
std::string encode_state_options(const std::vector<std::string>& options);
std::optional<std::vector<std::string>> decode_state_options(std::string_view value);
// Refuses a state of `stage` saved with other options than `now`, naming
// those that differ with both their values and ending with `remedy`; none
// when they are the same, or `now` is empty.
Status check_state_options(std::string_view stage, const std::vector<std::string>& saved,
                           const std::vector<std::string>& now,
                           std::string_view remedy = "give another --name or state file");

// A stage's state between its engine and the store.
//
// When the pipeline is an instance of a consumer group sharing the store
// (kpipe(7), MANY INSTANCES), kconsume's partitions lines carry epochs and
// the state is kept per partition, Kafka Streams' way: an engine of its
// own for each partition the instance owns (made by `make`), restored when
// the partition is assigned, saved at each checkpoint under the owner's
// epoch, and dropped when it is revoked. A stage then asks engine_for()
// which engine a record goes to. The engine given to the constructor is
// the state of a single pipeline, and stays empty in an instance.
class StageState {
 public:
  using MakeEngine = std::function<std::unique_ptr<Snapshottable>()>;
  // `store` null: the stage runs without --state, restores nothing and
  // does not read checkpoint lines. `make` null: the stage cannot keep its
  // state per partition, and refuses to run in an instance.
  StageState(SnapshotStore* store, std::string stage, Snapshottable& engine, Clock& clock,
             StateFormat format = {}, MakeEngine make = nullptr);
  ~StageState();

  bool enabled() const { return store_ != nullptr; }
  const std::string& stage() const { return stage_; }

  // Restores the engine from the newest complete checkpoint; the
  // checkpoint restored, nullopt when there was none or no store. A state
  // of another format is refused (a failure that says what to do).
  Expected<std::optional<int64_t>> restore();

  // For a control line, before the stage forwards it: a checkpoint saves
  // what changed since the previous one, so that the snapshot holds every
  // record before the line and only those. A partitions line with epochs
  // makes or drops the partitions' engines. A malformed checkpoint or
  // partitions line is a data_error naming the line.
  Status on_control(const Line& line);

  // --- an instance of a consumer group ------------------------------------
  // Whether the state is kept per partition (a partitions line with
  // epochs arrived).
  bool sliced() const { return sliced_; }
  // The engine of a record's partition; null when this instance does not
  // own it.
  Snapshottable* engine_for(std::string_view topic, int32_t partition);
  // The same from the envelope's "topic" and "partition" fields: a
  // data_error for a record without them, or of a partition not assigned.
  // `what` is what the stage keeps per partition ("keys"), for the message.
  Expected<Snapshottable*> engine_of(const JsonField& topic, const JsonField& partition,
                                     std::string_view what);
  // The engines of the partitions owned now.
  template <typename F>
  void for_each_slice(F&& f) const {
    for (const auto& [partition, slice] : slices_) f(partition, *slice.engine);
  }
  size_t slice_count() const { return slices_.size(); }
  // The engine of another owned partition than `mine`'s, a different one
  // at each call (round robin), with its partition; {null, null} when
  // there is none. A stage checks one other partition per sampled record
  // for keys that come from two partitions: a topic not keyed by the
  // stage's key shows in a few hundred records, at a cost that does not
  // grow with the partitions owned.
  std::pair<const TopicPartition*, Snapshottable*> other_slice(const Snapshottable* mine);
  // Offers the key of the record whose engine engine_of() or engine_for()
  // found last to that partition's sample (KeySampler), by `hash`, the
  // stage's hash of the key, the same in every instance. At each
  // checkpoint the samples go to the store (at most kKeySamplesPerSave,
  // partitions taking turns), which says whether another partition, of
  // any instance, had one of them: then on_key_split is called, once.
  void sample_key(uint64_t hash, std::string_view key) {
    if (last_ != slices_.end()) last_->second.sampler.offer(hash, key);
  }
  std::function<void(const KeySplit&)> on_key_split;
  // Called after a partition's engine is restored (entries: whether
  // anything was) and before one is dropped: for the stage's messages and
  // counters.
  std::function<void(const TopicPartition&, Snapshottable&, std::optional<int64_t> checkpoint)>
      on_restored;
  std::function<void(const TopicPartition&, Snapshottable&)> on_dropped;
  // The checkpoints saved, for --stats and --metrics.
  CheckpointMeter meter;

 private:
  class Restoring;
  struct Slice {
    std::unique_ptr<Snapshottable> engine;
    int64_t epoch = 0;
    bool marker_saved = false;
    bool options_saved = false;
    KeySampler sampler;
  };

  Status save(int64_t checkpoint);
  Status save_slices(const Checkpoint& c);
  Status record_key_samples(int64_t checkpoint);
  Status on_partitions(const PartitionEvent& e, const Line& line);
  // Adds the format marker and the options to `changes` when not yet
  // saved; returns which it added.
  std::pair<bool, bool> add_format(StateChanges& changes, bool marker_saved, bool options_saved);

  SnapshotStore* store_;
  std::string stage_;
  Snapshottable& engine_;
  Clock& clock_;
  StateFormat format_;
  MakeEngine make_;
  bool marker_saved_ = false;   // the store holds format_.marker live
  bool options_saved_ = false;  // the store holds format_.options live
  StateChanges changes_;
  bool sliced_ = false;
  std::map<TopicPartition, Slice> slices_;
  std::map<TopicPartition, Slice>::iterator last_ = slices_.end();
  size_t probe_ = 0;        // other_slice's next
  size_t sample_turn_ = 0;  // the partition whose samples go first
  bool split_found_ = false;
  std::vector<KeySample> samples_;
  TopicPartition key_;  // engine_for's lookup, without a string per record
};

// How often (in records) kwindow in an instance looks for a record's key
// in another of its partitions (StageState::other_slice).
inline constexpr uint64_t kCopartitionSample = 16;

// The warning of a stage that saw `key` on partitions `a` and `b` of an
// instance (kpipe(7), MANY INSTANCES): what goes wrong (`consequence`) and
// the fix, a topic re-keyed by `paths` (the stage's --key paths into the
// envelope, as written).
std::string copartition_warning(std::string_view key, const TopicPartition& a,
                                const TopicPartition& b, std::string_view consequence,
                                const std::vector<std::string>& paths);

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
