#include "kpipe/programs/kjoin.h"

#include <algorithm>
#include <deque>
#include <optional>

#include "kpipe/control.h"
#include "kpipe/event_time.h"
#include "kpipe/join.h"
#include "kpipe/json.h"
#include "kpipe/programs/dlq_targets.h"
#include "kpipe/programs/kjoin_internal.h"
#include "kpipe/programs/stage_state.h"
#include "kpipe/stage/bad_input.h"
#include "kpipe/stage/stateful.h"
#include "kpipe/store/sql.h"
#include "kpipe/target.h"

namespace kpipe {

namespace {

using kjoin_internal::JoinPlan;
using kjoin_internal::OnMiss;
using kjoin_internal::TableKind;
using kjoin_internal::TableSource;

constexpr const char* kStateFormat = "kjoin/1";
// How often the stream's loop looks at the table between records.
constexpr Millis kPollEvery = 100;
// Stream records waiting for the table's watermark, at most: beyond
// this, kjoin stops reading the stream and waits for the table.
constexpr size_t kMaxPending = 100'000;
constexpr size_t kMaxPendingBytes = size_t{64} << 20;

// --table as it may be shown: a PostgreSQL target without its password
// (kpipe(7), STORES), its #TABLE kept.
std::string shown_table(const std::string& text) {
  size_t hash = text.rfind('#');
  if (hash == std::string::npos) return display_target(text);
  return display_target(text.substr(0, hash)) + text.substr(hash);
}

// What decides the meaning of a saved state: the table, its key and the
// join's mode. A state saved for another table would restore rows that
// are not this table's. The table is kept as shown: the saved options are
// printed when they differ, and a new password is the same table.
std::vector<std::string> state_options(const JoinOptions& o) {
  std::vector<std::string> options{"--table " + shown_table(o.table)};
  std::string keys;
  for (const std::string& k : o.table_keys)
    keys += (keys.empty() ? "--table-key " : " --table-key ") + k;
  options.push_back(keys.empty() ? "no --table-key" : keys);
  if (o.as_of.empty()) {
    options.emplace_back("no --as-of");
  } else {
    options.push_back("--as-of with --table-time " +
                      (o.table_time.empty() ? ".timestamp" : o.table_time) + " --time-unit " +
                      o.time_unit);
  }
  return options;
}

Expected<FieldPath> parse_path(std::string_view option, const std::string& text) {
  auto path = FieldPath::parse(text);
  if (!path) return usage_error("{}: {}", option, path.error().message);
  return std::move(*path);
}

// A column name as the path of a member of the row's object.
Expected<FieldPath> column_path(std::string_view option, const std::string& column) {
  if (column.empty()) return usage_error("{}: a column name is empty", option);
  std::string quoted = ".";
  append_json_string(quoted, column);
  auto path = FieldPath::parse(quoted);
  if (!path) return usage_error("{} '{}': {}", option, column, path.error().message);
  return std::move(*path);
}

// The one place that asks which kind of table --table names.
const TableKind& table_kind(TargetKind kind) {
  switch (kind) {
    case TargetKind::kKafka:
      return kjoin_internal::kTopicTable;
    case TargetKind::kKinesis:
      return kjoin_internal::kStreamTable;
    case TargetKind::kSqlite:
    case TargetKind::kPostgres:
      return kjoin_internal::kDbTable;
    case TargetKind::kFile:
      break;
  }
  return kjoin_internal::kFileTable;
}

Expected<JoinPlan> make_plan(const JoinOptions& o, const std::string& program) {
  JoinPlan plan;
  plan.stage = stage_name(program, o.name);
  auto table = parse_table_target(o.table, display_target(o.table));
  if (!table) return table.take_error();
  plan.table = std::move(*table);
  plan.kind = &table_kind(plan.table.kind);
  if (o.keys.empty()) return usage_error("--key is required: the stream's side of the join");
  if (o.as.empty()) return usage_error("--as is required: where the row goes");
  for (const std::string& text : o.keys) {
    auto path = parse_path("--key", text);
    if (!path) return path.take_error();
    plan.key_slots.push_back(plan.fields.add(*path));
  }
  auto as = parse_path("--as", o.as);
  if (!as) return as.take_error();
  if (as->steps().empty() || !as->steps().back().has_key || as->steps().back().has_index)
    return usage_error("--as {}: the path must end in an object's member (.value.user)", o.as);
  plan.as_name = as->steps().back().key;
  plan.as_slot = plan.fields.add(*as);
  if (as->steps().size() > 1) {
    // The parent's path: the text up to the last step, as a JSON Pointer.
    std::string parent;
    for (size_t i = 0; i + 1 < as->steps().size(); ++i) {
      const PathStep& s = as->steps()[i];
      parent.push_back('/');
      std::string step = s.has_key ? s.key : std::to_string(s.index);
      for (char c : step) {
        if (c == '~')
          parent += "~0";
        else if (c == '/')
          parent += "~1";
        else
          parent.push_back(c);
      }
    }
    auto p = FieldPath::parse(parent);
    if (!p) return usage_error("--as: {}", p.error().message);
    plan.parent_slot = plan.fields.add(*p);
    // Messages name the parent as the user wrote it, where that is plain.
    plan.parent_name = parent;
    for (std::string_view sep : {".", "/"}) {
      std::string tail = std::string(sep) + plan.as_name;
      if (o.as.size() > tail.size() &&
          o.as.compare(o.as.size() - tail.size(), tail.size(), tail) == 0)
        plan.parent_name = o.as.substr(0, o.as.size() - tail.size());
    }
  }

  if (o.on_miss == "keep") {
    plan.on_miss = OnMiss::kKeep;
  } else if (o.on_miss == "drop") {
    plan.on_miss = OnMiss::kDrop;
  } else if (o.on_miss == "dlq") {
    plan.on_miss = OnMiss::kDlq;
    if (o.errors.dlq.empty())
      return usage_error("--on-miss dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  } else {
    return usage_error("--on-miss must be keep, drop or dlq, not '{}'", o.on_miss);
  }
  auto unit = parse_time_unit(o.time_unit);
  if (!unit) return usage_error("--time-unit: {}", unit.error().message);
  plan.time_unit = *unit;
  auto duration = [](std::string_view option, const std::string& text, Millis& out) -> Status {
    if (text.empty()) return {};
    auto d = parse_duration(text);
    if (!d) return usage_error("{}: {}", option, d.error().message);
    out = *d;
    return {};
  };
  KPIPE_TRY(duration("--table-watermark", o.table_watermark, plan.table_disorder));
  KPIPE_TRY(duration("--idle-timeout", o.idle_timeout, plan.idle_timeout));
  KPIPE_TRY(duration("--watermark", o.watermark, plan.stream_disorder));
  KPIPE_TRY(duration("--refresh", o.refresh, plan.refresh));
  if (!o.idle_timeout.empty() && plan.idle_timeout <= 0)
    return usage_error("--idle-timeout must be more than 0");
  if (!o.refresh.empty() && plan.refresh <= 0) return usage_error("--refresh must be more than 0");
  if (!o.refresh.empty() && !plan.kind->refreshed)
    return usage_error(
        "--refresh is for sqlite: and postgresql: tables (a file is read again when replaced, a "
        "topic followed)");

  // The table's side.
  const TableKind& kind = *plan.kind;
  bool sql = kind.columns;
  if (kind.keyed_by_record && !o.table_keys.empty())
    return usage_error(
        "--table-key is not for kafka: tables: a topic's table is keyed by the record key");
  if (!kind.keyed_by_record && o.table_keys.empty())
    return usage_error("--table {} needs --table-key {}", shown_table(o.table),
                       sql ? "COLUMN" : "PATH");
  if (!kind.keyed_by_record && o.table_keys.size() != o.keys.size())
    return usage_error("--table-key and --key must name as many fields ({} and {})",
                       o.table_keys.size(), o.keys.size());
  for (const std::string& text : o.table_keys) {
    auto path = sql ? column_path("--table-key", text) : parse_path("--table-key", text);
    if (!path) return path.take_error();
    plan.table_key_slots.push_back(plan.table_fields.add(*path));
  }
  if (!o.as_of.empty()) {
    plan.mode = JoinMode::kAsOf;
    auto path = parse_path("--as-of", o.as_of);
    if (!path) return path.take_error();
    plan.time_slot = plan.fields.add(*path);
    if (!o.state.empty()) {
      plan.topic_slot = plan.fields.add(*FieldPath::parse(".topic"));
      plan.partition_slot = plan.fields.add(*FieldPath::parse(".partition"));
    }
    if (!kind.keyed_by_record && o.table_time.empty())
      return usage_error("--as-of with --table {} needs --table-time: the time of each row",
                         shown_table(o.table));
  } else if (!o.table_time.empty()) {
    return usage_error("--table-time is for --as-of joins");
  }
  if (!o.table_time.empty()) {
    auto path =
        sql ? column_path("--table-time", o.table_time) : parse_path("--table-time", o.table_time);
    if (!path) return path.take_error();
    plan.table_time_slot = plan.table_fields.add(*path);
  }
  return plan;
}

// The line without the blanks around its value.
std::string_view trim(std::string_view text) {
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(start, end - start + 1);
}

class JoinStage final : public ParsingStage {
 public:
  JoinStage(const JoinPlan& plan, JoinEngine& engine, TableSource& table, BadInputHandler& bad,
            StageState& state, Io& io)
      : plan_(plan), engine_(engine), table_(table), bad_(bad), state_(state), io_(io) {
    last_poll_ = io.clock.steady();
    append_json_string(member_, plan.as_name);
    member_.push_back(':');
  }

  const FieldSet* fields() const override { return &plan_.fields; }

  Status on_parsed(const Line& line, const ParsedLine& parsed, Output& out) override {
    Status read = read_record(parsed);
    if (!read.ok()) {
      KPIPE_TRY(settle(out));
      return read;
    }
    if ((++since_poll_ & 255) == 0) KPIPE_TRY(poll_now(out));
    const JsonField* values = parsed.values;
    auto key = join_key(plan_.fields, plan_.key_slots, values, key_);
    if (!key) {
      KPIPE_TRY(settle(out));
      return key.take_error();
    }
    if (plan_.mode == JoinMode::kLookup) return look_up(line, values, *key, out);
    size_t slot = *plan_.time_slot;
    auto time = read_event_time(values[slot], plan_.fields.path(slot).text(), plan_.time_unit);
    if (!time) return time.take_error();
    stream_newest_ = std::max(stream_newest_, *time);
    if (state_.sliced()) {
      KPIPE_TRY(hold_in_slice(line, values, *key, *time, out));
    } else {
      if (!engine_.has_pending() && engine_.table_passed(*time))
        return emit_as_of(line, values, *key, *time, out);
      engine_.hold(*time, line.number, line.input, line.text);
    }
    KPIPE_TRY(release(out));
    // The table is behind: read it, not the stream, until it catches up.
    while (waiting() > kMaxPending || waiting_bytes() > kMaxPendingBytes) {
      if (stopping()) break;
      KPIPE_TRY(out.flush());
      KPIPE_TRY(table_.poll(engine_, kPollEvery));
      KPIPE_TRY(release(out));
    }
    return {};
  }

  // A control line does not overtake the records waiting before it
  // (kpipe(7), CONTROL LINES AND CHECKPOINTS): it waits behind them.
  // With --state a checkpoint line is the exception: the records waiting
  // are in the snapshot it saves, so it may go on at once.
  Status on_control(const Line& line, Output& out) override {
    KPIPE_TRY(settle(out));
    KPIPE_TRY(release(out));
    if (state_.sliced()) return control_in_instance(line, out);
    if (engine_.has_pending()) {
      bool checkpoint = false;
      if (state_.enabled()) {
        auto parsed = parse_checkpoint(line.text);
        checkpoint = parsed && parsed->has_value();
      }
      if (!checkpoint) {
        engine_.hold(kMinTime, line.number, line.input, line.text);
        return {};
      }
    }
    KPIPE_TRY(state_.on_control(line));
    // The first partitions line with epochs makes the stage an instance's:
    // its table is read whole by every instance, and saved by none
    // (kpipe(7), MANY INSTANCES).
    if (state_.sliced()) engine_.set_tracking(false);
    out.write_line(line.text);
    return {};
  }

  Status before_wait(Output& out) override {
    KPIPE_TRY(settle(out));
    KPIPE_TRY(table_.poll(engine_, 0));
    return release(out);
  }

  Status on_idle(Output& out) override {
    KPIPE_TRY(table_.poll(engine_, 0));
    return release(out);
  }

  Millis idle_interval() const override { return kPollEvery; }

  // Waits for the table no longer than --idle-timeout lets a quiet one
  // hold records; without it, joins what waits with the table as it is.
  Status on_end(Output& out) override {
    KPIPE_TRY(settle(out));
    if (plan_.mode != JoinMode::kAsOf || !has_waiting()) return {};
    KPIPE_TRY(table_.catch_up(engine_));
    KPIPE_TRY(release(out));
    if (plan_.idle_timeout > 0) {
      while (has_waiting() && !stopping()) {
        KPIPE_TRY(out.flush());
        KPIPE_TRY(table_.poll(engine_, kPollEvery));
        KPIPE_TRY(release(out));
      }
    }
    // Stopped with --state, the records waiting are read again from the
    // last checkpoint by the next run; without, they are written now.
    if (stopping() && state_.enabled()) return {};
    return release(out, true);
  }

  void fill_counters(Counters& c) const override {
    c.out = joined_ + missed_ - dead_lettered_;
    c.dropped = dropped_;
    c.state_size = engine_.rows();
    state_.meter.fill(c);
  }

  uint64_t joined() const { return joined_; }
  uint64_t missed() const { return missed_; }
  uint64_t dropped() const { return dropped_; }
  uint64_t dead_lettered() const { return dead_lettered_; }

  // Records waiting for the table: a single pipeline's, or those of an
  // instance's partitions.
  size_t waiting() const {
    size_t n = engine_.pending();
    state_.for_each_slice([&](const TopicPartition&, Snapshottable& q) {
      n += static_cast<PendingQueue&>(q).size();
    });
    return n;
  }

 private:
  size_t waiting_bytes() const {
    size_t n = engine_.pending_bytes();
    state_.for_each_slice([&](const TopicPartition&, Snapshottable& q) {
      n += static_cast<PendingQueue&>(q).bytes();
    });
    return n;
  }

  bool has_waiting() const { return !controls_.empty() || waiting() > 0; }

  // An instance's record waits in its source partition's queue, which is
  // saved with the partition's state and moves with it (kpipe(7), MANY
  // INSTANCES); it is joined at once only when nothing that came before
  // it in its partition, and no control line, waits.
  Status hold_in_slice(const Line& line, const JsonField* values,
                       std::optional<std::string_view> key, Millis time, Output& out) {
    auto found = state_.engine_of(values[*plan_.topic_slot], values[*plan_.partition_slot],
                                  "records waiting for the table");
    if (!found) return found.take_error();
    auto& queue = static_cast<PendingQueue&>(**found);
    queue.read(time);
    if (queue.empty() && controls_.empty() && engine_.table_passed(time))
      return emit_as_of(line, values, key, time, out);
    queue.hold(time, line.number, line.input, line.text, ++arrivals_);
    return {};
  }

  // In an instance, checkpoint and partitions lines go on at once: the
  // records waiting are in the slices the checkpoint saves, and those of
  // a revoked partition go with its slice to its next owner, which joins
  // them (kpipe(7), MANY INSTANCES). Another control line waits behind the
  // records that came before it.
  Status control_in_instance(const Line& line, Output& out) {
    bool now = controls_.empty() && waiting() == 0;
    if (!now) {
      auto checkpoint = parse_checkpoint(line.text);
      auto event = parse_partition_event(line.text);
      // A malformed one is refused by state_ below.
      now = !checkpoint || checkpoint->has_value() || !event || event->has_value();
    }
    if (!now) {
      controls_.push_back({++arrivals_, std::string(line.text)});
      return {};
    }
    KPIPE_TRY(state_.on_control(line));
    out.write_line(line.text);
    return {};
  }

  bool stopping() const { return io_.stop != nullptr && io_.stop->load(); }

  Status poll_now(Output& out) {
    Millis now = io_.clock.steady();
    if (now - last_poll_ < kPollEvery) return {};
    last_poll_ = now;
    KPIPE_TRY(settle(out));
    KPIPE_TRY(table_.poll(engine_, 0));
    return release(out);
  }

  // The line was parsed, and the row can go where --as says: its member
  // exists, or its parent is an object.
  Status read_record(const ParsedLine& parsed) const {
    if (!parsed.status.ok()) return parsed.status;
    return check_target(parsed.values, parsed.root_type);
  }

  Status check_target(const JsonField* values, JsonType root) const {
    if (values[plan_.as_slot].type != JsonType::kMissing) return {};
    if (!plan_.parent_slot) {
      if (root == JsonType::kObject) return {};
      return data_error("--as: the line is {}, not an object", json_type_phrase(root));
    }
    const JsonField& parent = values[*plan_.parent_slot];
    if (parent.type == JsonType::kObject) return {};
    const std::string& path = plan_.parent_name;
    if (parent.type == JsonType::kMissing) return data_error("--as: field '{}' is missing", path);
    return data_error("--as: field '{}' is {}, not an object", path, json_type_phrase(parent.type));
  }

  Status emit_as_of(const Line& line, const JsonField* values, std::optional<std::string_view> key,
                    Millis time, Output& out) {
    std::optional<std::string_view> row;
    if (key) {
      VersionedTable::Found found = engine_.find_as_of(*key, time);
      if (found.pruned)
        return data_error(
            "event time {} is older than the versions kept for key {} (raise --watermark)",
            format_rfc3339(time), *key);
      row = found.row;
    }
    return emit(line, values, key, row, out);
  }

  // Where the row goes in a line: over the bytes [at, at + length), or
  // (`insert`) as a new member before the byte at `at`, its parent's
  // closing brace, after a comma unless the parent is empty.
  struct Splice {
    size_t at = 0;
    size_t length = 0;
    bool insert = false;
    bool comma = false;
  };

  Splice splice_of(std::string_view text, const JsonField* values) const {
    Splice sp;
    const JsonField& target = values[plan_.as_slot];
    if (target.type != JsonType::kMissing) {
      sp.at = static_cast<size_t>(target.raw.data() - text.data());
      sp.length = target.raw.size();
      return sp;
    }
    std::string_view object = plan_.parent_slot ? values[*plan_.parent_slot].raw : trim(text);
    sp.at = static_cast<size_t>(object.data() - text.data()) + object.size() - 1;
    sp.insert = true;
    sp.comma = object.find_first_not_of(" \t\r\n", 1) != object.size() - 1;
    return sp;
  }

  Status emit(const Line& line, const JsonField* values, std::optional<std::string_view> key,
              std::optional<std::string_view> row, Output& out) {
    return emit(line, splice_of(line.text, values), key, row, out);
  }

  Status emit(const Line& line, const Splice& sp, std::optional<std::string_view> key,
              std::optional<std::string_view> row, Output& out) {
    if (!row) {
      if (plan_.on_miss == OnMiss::kDrop) {
        ++dropped_;
        return {};
      }
      ++missed_;
      if (plan_.on_miss == OnMiss::kDlq) {
        ++dead_lettered_;
        std::string why = key ? fmt::format("no row in the table for key {}", *key)
                              : std::string("no row in the table for a null key");
        return bad_.dead_letter(std::string(line.input), line, why);
      }
    } else {
      ++joined_;
    }
    std::string_view value = row ? *row : std::string_view("null");
    std::string& buf = out.buffer();
    std::string_view text = line.text;
    buf.append(text.substr(0, sp.at));
    if (sp.insert) {
      if (sp.comma) buf.push_back(',');
      buf.append(member_);
    }
    buf.append(value);
    buf.append(text.substr(sp.at + sp.length));
    buf.push_back('\n');
    return out.end_record();
  }

  // Lookups a few records deep: a record's index slot is fetched when it
  // is parsed, its entry two records later, and it is joined two after
  // that; the cache misses of a large table overlap the parsing instead
  // of stalling it (one record apart was too close to hide them; 4 and 2
  // measured best on bench/join.sh). What is held is written before
  // anything that follows it and before the driver waits.
  struct Held {
    HeldLine line;
    std::string key;
    bool has_key = false;
    uint64_t hash = 0;
    Splice splice;
  };

  Status look_up(const Line& line, const JsonField* values, std::optional<std::string_view> key,
                 Output& out) {
    if (held_count_ == kHeld) KPIPE_TRY(settle_oldest(out));
    if (held_count_ >= kEntryAfter) {
      const Held& older = held_[(held_first_ + held_count_ - kEntryAfter) % kHeld];
      if (older.has_key) engine_.lookup_table().prefetch_entry(older.hash);
    }
    Held& h = held_[(held_first_ + held_count_) % kHeld];
    ++held_count_;
    h.line.assign(line);
    h.splice = splice_of(line.text, values);
    h.has_key = key.has_value();
    if (key) {
      h.key.assign(*key);
      h.hash = LookupTable::hash(*key);
      engine_.lookup_table().prefetch_slot(h.hash);
    }
    return {};
  }

  Status settle_oldest(Output& out) {
    Held& h = held_[held_first_];
    held_first_ = (held_first_ + 1) % kHeld;
    --held_count_;
    std::optional<std::string_view> row;
    if (h.has_key) row = engine_.lookup_table().find(h.key, h.hash);
    std::optional<std::string_view> key;
    if (h.has_key) key = h.key;
    return emit(h.line.line(), h.splice, key, row, out);
  }

  Status settle(Output& out) {
    while (held_count_ > 0) KPIPE_TRY(settle_oldest(out));
    return {};
  }

  // Joins the waiting records the table's watermark has passed (all of
  // them with `all`), oldest first.
  Status release(Output& out, bool all = false) {
    if (state_.sliced()) return release_slices(out, all);
    if (!engine_.has_pending()) return {};
    Millis watermark = engine_.table_watermark();
    while (engine_.has_pending() && (all || JoinEngine::passed(watermark, engine_.front().time))) {
      KPIPE_TRY(join_waiting(engine_.front(), out));
      engine_.pop_front();
    }
    engine_.maybe_prune(stream_newest_ - plan_.stream_disorder);
    return {};
  }

  // The same over an instance's queues, one per partition: each in its
  // order, and a control line held once every record before it is out.
  Status release_slices(Output& out, bool all) {
    Millis watermark = engine_.table_watermark();
    while (has_waiting()) {
      uint64_t barrier = controls_.empty() ? UINT64_MAX : controls_.front().arrival;
      Status status;
      bool before = false;  // a record from before the barrier still waits
      state_.for_each_slice([&](const TopicPartition&, Snapshottable& e) {
        auto& queue = static_cast<PendingQueue&>(e);
        while (status.ok() && !queue.empty() && queue.front().arrival < barrier &&
               (all || JoinEngine::passed(watermark, queue.front().time))) {
          status = join_waiting(queue.front(), out);
          if (status.ok()) queue.pop_front();
        }
        if (!queue.empty() && queue.front().arrival < barrier) before = true;
      });
      KPIPE_TRY(status);
      if (controls_.empty() || before) break;
      out.write_line(controls_.front().text);
      controls_.pop_front();
    }
    // Each partition's records keep what they may need by the partition's
    // own time: one taken over may be far behind those read here before.
    if (engine_.prune_due()) {
      Millis bound = stream_newest_ - plan_.stream_disorder;
      state_.for_each_slice([&](const TopicPartition&, Snapshottable& e) {
        bound = std::min(bound, static_cast<PendingQueue&>(e).needed_from(plan_.stream_disorder));
      });
      engine_.maybe_prune(bound);
    }
    return {};
  }

  // Joins a waiting record (or writes a control line held behind records).
  Status join_waiting(const PendingRecord& r, Output& out) {
    if (is_control_line(r.text)) {
      out.write_line(r.text);
      return {};
    }
    released_.assign(r.text, r.number, r.input);
    Line line = released_.line();
    Status joined = reader_.read(line.text, plan_.fields, values_);
    if (joined.ok()) {
      auto key = join_key(plan_.fields, plan_.key_slots, values_.data(), key_);
      joined = key ? emit_as_of(line, values_.data(), *key, r.time, out) : Status(key.take_error());
    }
    if (!joined.ok()) {
      if (joined.error().status != ExitStatus::kDataError) return joined;
      KPIPE_TRY(bad_.handle(r.input, line, joined.error().message));
    }
    return {};
  }

  const JoinPlan& plan_;
  JoinEngine& engine_;
  TableSource& table_;
  BadInputHandler& bad_;
  StageState& state_;
  Io& io_;
  std::string key_;
  std::string member_;  // "NAME": of --as
  static constexpr size_t kHeld = 4;
  static constexpr size_t kEntryAfter = 2;
  Held held_[kHeld];
  size_t held_first_ = 0;
  size_t held_count_ = 0;
  uint64_t since_poll_ = 0;
  Millis last_poll_ = 0;
  Millis stream_newest_ = kMinTime;
  // For waiting records, joined later.
  JsonReader reader_;
  std::vector<JsonField> values_;
  HeldLine released_;
  // An instance's control lines held behind records, with their arrival
  // (PendingRecord::arrival).
  struct HeldControl {
    uint64_t arrival = 0;
    std::string text;
  };
  std::deque<HeldControl> controls_;
  uint64_t arrivals_ = 0;
  uint64_t joined_ = 0;
  uint64_t missed_ = 0;
  uint64_t dropped_ = 0;
  uint64_t dead_lettered_ = 0;
};

}  // namespace

Status run_join(const JoinOptions& options, Io& io) {
  auto plan = make_plan(options, io.program);
  if (!plan) return plan.take_error();
  auto stats = parse_stats(options.stats, plan->stage);
  if (!stats) return stats.take_error();

  auto opened = plan->kind->open(*plan, options, io);
  if (!opened) return opened.take_error();
  std::unique_ptr<TableSource> table = std::move(*opened);
  // A --dlq kafka:TOPIC shares the table topic's client settings.
  const KafkaLog* kafka = table->kafka_log();
  auto bad = kafka
                 ? make_bad_input_handler(options.errors, plan->stage, io, kafka, &options.kinesis)
                 : make_bad_input_handler(options.errors, plan->stage, io, options.kafka,
                                          &options.kinesis);
  if (!bad) return bad.take_error();

  JoinEngine engine(plan->mode, table->rows_saved(), plan->table_disorder, plan->idle_timeout,
                    io.clock);
  auto store = open_stage_state(options.state);
  if (!store) return store.take_error();
  // An instance keeps the records waiting per source partition, a queue
  // of its own for each (kpipe(7), MANY INSTANCES).
  StageState state(store->get(), plan->stage, engine, io.clock,
                   StateFormat{kStateFormat, "", state_options(options)}, [] {
                     auto queue = std::make_unique<PendingQueue>();
                     queue->set_tracking(true);
                     return queue;
                   });
  uint64_t handed_over = 0;  // records waiting in partitions revoked
  state.on_restored = [&](const TopicPartition& p, Snapshottable& e,
                          std::optional<int64_t> checkpoint) {
    size_t waiting = static_cast<PendingQueue&>(e).size();
    if (!checkpoint || waiting == 0) return;
    io.reporter.info(fmt::format(
        "restored {} records waiting for the table of '{}' for {} [{}] from checkpoint {} in '{}'",
        waiting, plan->stage, p.topic, p.partition, *checkpoint, display_target(options.state)));
  };
  state.on_dropped = [&](const TopicPartition&, Snapshottable& e) {
    handed_over += static_cast<PendingQueue&>(e).size();
  };
  engine.set_tracking(state.enabled());
  KPIPE_TRY(await_input(store->get(), options.input, io.stop));
  auto restored = state.restore();
  if (!restored) return restored.take_error();
  if (*restored)
    io.reporter.info(fmt::format("restored {} rows of '{}' from checkpoint {} in '{}'",
                                 engine.rows(), plan->stage, **restored,
                                 display_target(options.state)));

  table->set_on_error((*bad)->mode());
  KPIPE_TRY(table->load(engine));

  JoinStage stage(*plan, engine, *table, **bad, state, io);
  FilterSettings settings{options.input, std::move(*stats)};
  Status run = run_filter(stage, settings, **bad, io);
  table->at_exit(io.reporter);
  if (!run.ok()) return run;
  uint64_t bad_lines = (*bad)->skipped() + (*bad)->dead_lettered() - stage.dead_lettered();
  std::string bad_part = bad_lines > 0 ? fmt::format(", {} bad", bad_lines) : "";
  // The records still waiting, and those handed over with their
  // partitions, are in the state for whoever joins them.
  io.reporter.info(fmt::format(
      "{} records in, {} joined, {} missed, {} dropped{}; table {} rows",
      stage.joined() + stage.missed() + stage.dropped() + bad_lines + stage.waiting() + handed_over,
      stage.joined(), stage.missed(), stage.dropped(), bad_part, engine.rows()));
  return {};
}

}  // namespace kpipe
