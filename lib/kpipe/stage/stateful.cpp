#include "kpipe/stage/stateful.h"

#include <cstring>
#include <utility>

#include "kpipe/control.h"
#include "kpipe/envelope.h"

namespace kpipe {

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += " and ";
    out += item;
  }
  return out;
}

}  // namespace

std::string encode_state_options(const std::vector<std::string>& options) {
  std::string v = "[";
  for (size_t i = 0; i < options.size(); ++i) {
    if (i > 0) v.push_back(',');
    append_json_string(v, options[i]);
  }
  v.push_back(']');
  return v;
}

std::optional<std::vector<std::string>> decode_state_options(std::string_view value) {
  auto v = parse_json(value);
  if (!v || v->type != JsonType::kArray) return std::nullopt;
  std::vector<std::string> options;
  for (const JsonValue& item : v->items) {
    if (item.type != JsonType::kString) return std::nullopt;
    options.push_back(item.str);
  }
  return options;
}

// Names only the options that differ, when the two lists say the same
// things in the same order.
Status check_state_options(std::string_view stage, const std::vector<std::string>& saved,
                           const std::vector<std::string>& now, std::string_view remedy) {
  if (now.empty() || saved == now) return {};
  std::vector<std::string> was_said, now_said;
  if (saved.size() == now.size()) {
    for (size_t i = 0; i < now.size(); ++i) {
      if (saved[i] == now[i]) continue;
      was_said.push_back(saved[i]);
      now_said.push_back(now[i]);
    }
  } else {
    was_said = saved;
    now_said = now;
  }
  return failure("the saved state of '{}' was made with {}, not {}: {}", stage, join(was_said),
                 join(now_said), remedy);
}

// Stands between the store and the engine while restoring: takes the
// format marker and the options out of the entries, and refuses the state
// at the end if its format or its options are not the stage's, before the
// engine finishes and the store commits.
class StageState::Restoring final : public Snapshottable {
 public:
  Restoring(const StageState& state, Snapshottable& engine) : state_(state), engine_(engine) {}

  void take_changes(StateChanges& out) override { engine_.take_changes(out); }

  Status restore_entry(std::string_view key, std::string_view value) override {
    if (key == kStateFormatKey) {
      saved_marker_ = std::string(value);
      return {};
    }
    if (key == kStateOptionsKey) {
      saved_options_ = decode_state_options(value);
      if (!saved_options_)
        return failure("the saved state of '{}' has a malformed options entry", state_.stage_);
      return {};
    }
    any_ = true;
    return engine_.restore_entry(key, value);
  }

  Status finish_restore() override {
    KPIPE_TRY(check_format());
    KPIPE_TRY(check_options());
    return engine_.finish_restore();
  }

  bool marked() const { return saved_marker_.has_value(); }
  bool has_options() const { return saved_options_.has_value(); }

 private:
  Status check_format() const {
    const StateFormat& format = state_.format_;
    if (saved_marker_) {
      if (*saved_marker_ == format.marker) return {};
      return failure(
          "the saved state of '{}' is of format '{}', which this stage does not read: give another "
          "--name or state file",
          state_.stage_, *saved_marker_);
    }
    if (!any_ || format.unmarked_refusal.empty()) return {};
    return failure("the saved state of '{}' {}: give another --name or state file", state_.stage_,
                   format.unmarked_refusal);
  }

  Status check_options() const {
    if (!saved_options_) return {};
    return check_state_options(state_.stage_, *saved_options_, state_.format_.options);
  }

  const StageState& state_;
  Snapshottable& engine_;
  std::optional<std::string> saved_marker_;
  std::optional<std::vector<std::string>> saved_options_;
  bool any_ = false;  // entries besides the marker
};

StageState::StageState(SnapshotStore* store, std::string stage, Snapshottable& engine, Clock& clock,
                       StateFormat format, MakeEngine make)
    : store_(store),
      stage_(std::move(stage)),
      engine_(engine),
      clock_(clock),
      format_(std::move(format)),
      make_(std::move(make)) {}

StageState::~StageState() = default;

Expected<std::optional<int64_t>> StageState::restore() {
  if (store_ == nullptr) return std::optional<int64_t>{};
  Restoring restoring(*this, engine_);
  auto restored = store_->restore(stage_, restoring);
  if (!restored) return restored.take_error();
  marker_saved_ = restoring.marked();
  // Restored only when they are the stage's own.
  options_saved_ = restoring.has_options();
  return *restored;
}

std::pair<bool, bool> StageState::add_format(StateChanges& changes, bool marker_saved,
                                             bool options_saved) {
  bool marking = !marker_saved && !format_.marker.empty();
  if (marking) changes.put.emplace_back(kStateFormatKey, format_.marker);
  bool recording = !options_saved && !format_.options.empty();
  if (recording) changes.put.emplace_back(kStateOptionsKey, encode_state_options(format_.options));
  return {marking, recording};
}

Status StageState::on_control(const Line& line) {
  if (store_ == nullptr) return {};
  auto checkpoint = parse_checkpoint(line.text);
  if (!checkpoint)
    return data_error("{}: line {}: {}", line.input, line.number, checkpoint.error().message);
  if (*checkpoint) {
    KPIPE_TRY(sliced_ ? save_slices(**checkpoint) : save((*checkpoint)->id));
    meter.passed(**checkpoint, clock_.now());
    return {};
  }
  auto event = parse_partition_event(line.text);
  if (!event) return data_error("{}: line {}: {}", line.input, line.number, event.error().message);
  if (*event) return on_partitions(**event, line);
  return {};
}

Status StageState::save(int64_t checkpoint) {
  changes_.clear();
  engine_.take_changes(changes_);
  auto [marking, recording] = add_format(changes_, marker_saved_, options_saved_);
  Status saved = store_->save_snapshot(stage_, checkpoint, changes_, clock_.now());
  // The changes can be millions of strings: free them now, not at the next
  // checkpoint.
  changes_.clear();
  if (saved.ok() && marking) marker_saved_ = true;
  if (saved.ok() && recording) options_saved_ = true;
  return saved;
}

Status StageState::on_partitions(const PartitionEvent& e, const Line& line) {
  if (e.kind == PartitionEvent::Kind::kRevoked) {
    // kconsume revokes after the checkpoint that hands the partitions
    // over has completed: what the engines hold is saved.
    for (const TopicPartition& p : e.partitions) {
      auto it = slices_.find(p);
      if (it == slices_.end()) continue;
      if (on_dropped) on_dropped(p, *it->second.engine);
      slices_.erase(it);
    }
    last_ = slices_.end();
    return {};
  }
  if (!e.owned()) {
    if (!sliced_ || e.partitions.empty()) return {};
    return data_error(
        "{}: line {}: partitions assigned without an epoch in a pipeline whose partitions are "
        "owned: one kconsume per pipeline",
        line.input, line.number);
  }
  if (!make_)
    return failure(
        "stage '{}' cannot keep its state per partition, as an instance of a consumer group "
        "sharing its state database does: run it in a pipeline of one kconsume without -g, or "
        "without --state",
        stage_);
  sliced_ = true;
  for (size_t i = 0; i < e.partitions.size(); ++i) {
    const TopicPartition& p = e.partitions[i];
    Slice slice;
    slice.engine = make_();
    slice.epoch = e.epochs[i];
    Restoring restoring(*this, *slice.engine);
    auto restored = store_->restore_slice(stage_, p, restoring);
    if (!restored) return restored.take_error();
    slice.marker_saved = restoring.marked();
    slice.options_saved = restoring.has_options();
    if (on_restored) on_restored(p, *slice.engine, *restored);
    slices_[p] = std::move(slice);
  }
  last_ = slices_.end();
  return {};
}

Status StageState::save_slices(const Checkpoint& c) {
  // The epochs the checkpoint line carries are kconsume's: they win over
  // those of the assigned line (the same, unless a line was lost).
  for (const PartitionOffset& o : c.offsets) {
    auto it = slices_.find({o.topic, o.partition});
    if (it != slices_.end() && o.epoch > 0) it->second.epoch = o.epoch;
  }
  std::vector<StateChanges> changes(slices_.size());
  std::vector<SliceChanges> slices;
  std::vector<std::pair<bool, bool>> added;
  size_t i = 0;
  for (auto& [partition, slice] : slices_) {
    slice.engine->take_changes(changes[i]);
    added.push_back(add_format(changes[i], slice.marker_saved, slice.options_saved));
    slices.push_back({partition, slice.epoch, &changes[i]});
    ++i;
  }
  Status saved = store_->save_slices(stage_, c.id, slices, clock_.now());
  if (!saved.ok()) return saved;
  i = 0;
  for (auto& [partition, slice] : slices_) {
    if (added[i].first) slice.marker_saved = true;
    if (added[i].second) slice.options_saved = true;
    ++i;
  }
  return record_key_samples(c.id);
}

Status StageState::record_key_samples(int64_t checkpoint) {
  if (slices_.empty()) return {};
  // Partitions take turns, from where the last checkpoint stopped, so that
  // the cost stays kKeySamplesPerSave whatever their number; the others
  // keep their samples for their turn.
  samples_.clear();
  size_t n = slices_.size();
  size_t first = sample_turn_ % n;
  auto it = std::next(slices_.begin(), static_cast<std::ptrdiff_t>(first));
  size_t visited = 0;
  for (; visited < n; ++visited) {
    KeySampler& sampler = it->second.sampler;
    if (samples_.size() + sampler.size() > kKeySamplesPerSave) break;
    sampler.take(it->first, samples_);
    if (++it == slices_.end()) it = slices_.begin();
  }
  sample_turn_ = first + visited;
  if (samples_.empty()) return {};
  std::vector<std::string> topics;
  for (const auto& [partition, slice] : slices_)
    if (topics.empty() || topics.back() != partition.topic) topics.push_back(partition.topic);
  auto split = store_->record_key_samples(stage_, checkpoint, samples_, topics);
  if (!split) return split.take_error();
  if (!*split || split_found_) return {};
  split_found_ = true;
  if (on_key_split) on_key_split(**split);
  return {};
}

std::pair<const TopicPartition*, Snapshottable*> StageState::other_slice(
    const Snapshottable* mine) {
  if (slices_.size() < 2) return {nullptr, nullptr};
  auto it = std::next(slices_.begin(), static_cast<std::ptrdiff_t>(probe_++ % slices_.size()));
  if (it->second.engine.get() == mine && ++it == slices_.end()) it = slices_.begin();
  if (it->second.engine.get() == mine) return {nullptr, nullptr};
  return {&it->first, it->second.engine.get()};
}

Expected<Snapshottable*> StageState::engine_of(const JsonField& topic, const JsonField& partition,
                                               std::string_view what) {
  if (topic.type != JsonType::kString || partition.type != JsonType::kNumber ||
      !partition.is_integer || partition.integer < INT32_MIN || partition.integer > INT32_MAX)
    return data_error(
        "a record without the envelope's 'topic' and 'partition', which an instance of a "
        "consumer group keeps its {} by",
        what);
  Snapshottable* found = engine_for(topic.str, static_cast<int32_t>(partition.integer));
  if (found == nullptr)
    return data_error("a record of {} [{}], a partition kconsume has not assigned", topic.str,
                      partition.integer);
  return found;
}

Snapshottable* StageState::engine_for(std::string_view topic, int32_t partition) {
  if (last_ != slices_.end() && last_->first.partition == partition && last_->first.topic == topic)
    return last_->second.engine.get();
  key_.topic.assign(topic);
  key_.partition = partition;
  last_ = slices_.find(key_);
  return last_ == slices_.end() ? nullptr : last_->second.engine.get();
}

std::string copartition_warning(std::string_view key, const TopicPartition& a,
                                const TopicPartition& b, std::string_view consequence,
                                const std::vector<std::string>& paths) {
  constexpr size_t kShown = 200;
  // kproduce -k reads the record kconsume --format value writes: the
  // envelope's value.
  std::string keys;
  for (const std::string& path : paths) {
    std::string_view p = path;
    if (p.starts_with(".value.")) p.remove_prefix(6);
    if (!keys.empty()) keys += ' ';
    keys += fmt::format("-k {}", p);
  }
  if (keys.empty()) keys = "-k PATH";
  return fmt::format(
      "key {}{} came from partitions {} [{}] and {} [{}]: {}; re-key the topic by it first: "
      "kconsume -t {} --format value | kproduce -t {}-rekeyed {} (kpipe(7), MANY INSTANCES)",
      key.substr(0, kShown), key.size() > kShown ? "..." : "", a.topic, a.partition, b.topic,
      b.partition, consequence, b.topic, b.topic, keys);
}

Expected<std::string_view> encode_key(const FieldSet& fields, std::span<const size_t> slots,
                                      const JsonField* values, std::string& buffer) {
  buffer.clear();
  bool one = slots.size() == 1;
  if (!one) buffer.push_back('[');
  for (size_t i = 0; i < slots.size(); ++i) {
    const JsonField& f = values[slots[i]];
    if (f.type == JsonType::kMissing)
      return data_error("field '{}' is missing", fields.path(slots[i]).text());
    if (i > 0) buffer.push_back(',');
    // Strings without escapes (nearly all) are used as they appear.
    bool plain =
        f.type != JsonType::kString || std::memchr(f.raw.data(), '\\', f.raw.size()) == nullptr;
    if (f.type == JsonType::kObject || f.type == JsonType::kArray) {
      append_minified(buffer, f.raw);
    } else if (!plain) {
      append_json_string(buffer, f.str);
    } else if (one) {
      return f.raw;
    } else {
      buffer.append(f.raw);
    }
  }
  if (!one) buffer.push_back(']');
  return std::string_view(buffer);
}

Expected<std::optional<std::string_view>> join_key(const FieldSet& fields,
                                                   std::span<const size_t> slots,
                                                   const JsonField* values, std::string& buffer) {
  if (slots.size() != 1) {
    auto key = encode_key(fields, slots, values, buffer);
    if (!key) return key.take_error();
    return std::optional<std::string_view>(*key);
  }
  const JsonField& f = values[slots[0]];
  if (f.type == JsonType::kMissing)
    return data_error("field '{}' is missing", fields.path(slots[0]).text());
  return record_key_bytes(f, buffer);
}

}  // namespace kpipe
