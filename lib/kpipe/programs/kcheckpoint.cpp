#include "kpipe/programs/kcheckpoint.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "kpipe/choices.h"
#include "kpipe/programs/kconsume.h"
#include "kpipe/control.h"
#include "kpipe/json.h"
#include "kpipe/kafka/client.h"
#include "kpipe/stage/line_feed.h"
#include "kpipe/table.h"
#include "kpipe/programs/dlq_targets.h"

namespace kpipe {

int64_t reset_target(const ResetSpec& spec, std::optional<int64_t> current, int64_t low, int64_t high,
                     int64_t at_time) {
  int64_t target = low;
  switch (spec.kind) {
    case ResetSpec::Kind::kEarliest: target = low; break;
    case ResetSpec::Kind::kLatest: target = high; break;
    case ResetSpec::Kind::kTime: target = at_time; break;
    case ResetSpec::Kind::kShift:
      // Saturating: the result is clamped below anyway.
      if (__builtin_add_overflow(current.value_or(low), spec.value, &target))
        target = spec.value > 0 ? INT64_MAX : INT64_MIN;
      break;
    case ResetSpec::Kind::kOffset: target = spec.value; break;
  }
  return std::clamp(target, low, high);
}

namespace {

Expected<std::unique_ptr<StateStore>> open_state(const CheckpointOptions& o) {
  if (o.state.empty()) return usage_error("--state FILE is required");
  return StateStore::open(o.state);
}

// table on a terminal, ndjson otherwise, unless --format says.
Expected<bool> use_table(const CheckpointOptions& o, const Io& io) {
  if (o.format.empty()) return io.interactive;
  auto i = parse_choice("--format", o.format, {"table", "ndjson"});
  if (!i) return i.take_error();
  return *i == 0;
}

void append_offset_json(std::string& out, const StoredOffset& s) {
  out.append("{\"topic\":");
  append_json_string(out, s.topic);
  out.append(",\"partition\":");
  append_int(out, s.partition);
  out.append(",\"offset\":");
  append_int(out, s.offset);
  out.append(",\"checkpoint\":");
  append_int(out, s.checkpoint);
  out.append(",\"committed_at\":\"");
  append_rfc3339(out, s.committed_at);
  out.append("\"}\n");
}

// The commit stage: marks each checkpoint complete once every line before
// it has been written out, and warns when checkpoints stop arriving while
// data keeps coming (a stage in between drops control lines).
class CommitStage final : public LineStage {
 public:
  CommitStage(StateStore& store, std::string stage, bool passthrough, Millis interval, Io& io)
      : store_(store), stage_(std::move(stage)), passthrough_(passthrough), interval_(interval), io_(io) {
    last_checkpoint_ = io_.clock.steady();
  }

  Status on_line(const Line& line, Output& out) override {
    ++since_checkpoint_;
    if (passthrough_) {
      out.write_line(line.text);
      ++counters_out_;
    }
    if ((since_checkpoint_ & 1023) == 1) check_silence();
    return {};
  }

  Status on_control(const Line& line, Output& out) override {
    auto cp = parse_checkpoint(line.text);
    if (!cp) return cp.take_error();
    if (!*cp) {
      // Partition events guide the event-time stages before this one; the
      // terminal stage's output is data. Other kinds are forwarded.
      auto event = parse_partition_event(line.text);
      if (!event) return event.take_error();
      if (passthrough_ && !*event) out.write_line(line.text);
      return {};
    }
    // Every line before the checkpoint leaves the process before the
    // checkpoint counts as complete.
    KPIPE_TRY(out.flush());
    KPIPE_TRY(store_.complete(**cp, stage_, io_.clock.now()));
    ++completed_;
    since_checkpoint_ = 0;
    warned_ = false;
    last_checkpoint_ = io_.clock.steady();
    return {};
  }

  Status on_idle(Output&) override {
    check_silence();
    return {};
  }

  Status on_end(Output&) override {
    if (completed_ == 0 && since_checkpoint_ > 0)
      io_.reporter.warning(fmt::format(
          "{} records arrived but no checkpoint line: run kconsume with --state, and make sure every stage in "
          "between lets control lines through (for jq: jq -c 'if has(\"$kpipe\") then . else ... end')",
          since_checkpoint_));
    io_.reporter.info(fmt::format("completed {} checkpoints", completed_));
    return {};
  }

  void fill_counters(Counters& c) const override { c.out = counters_out_; }

 private:
  void check_silence() {
    Millis quiet = io_.clock.steady() - last_checkpoint_;
    if (warned_ || since_checkpoint_ == 0 || quiet < 3 * interval_) return;
    warned_ = true;
    io_.reporter.warning(fmt::format(
        "no checkpoint line for {} while {} records arrived: a stage in between drops control lines; let them "
        "through (for jq: jq -c 'if has(\"$kpipe\") then . else ... end')",
        format_duration(quiet), since_checkpoint_));
  }

  StateStore& store_;
  std::string stage_;
  bool passthrough_;
  Millis interval_;
  Io& io_;
  Millis last_checkpoint_;
  uint64_t since_checkpoint_ = 0;
  uint64_t completed_ = 0;
  uint64_t counters_out_ = 0;
  bool warned_ = false;
};

struct Scope {
  std::string topic;
  std::vector<int32_t> partitions;  // empty: all
};

Expected<std::vector<Scope>> parse_scopes(const std::vector<std::string>& specs) {
  std::vector<Scope> out;
  for (const auto& spec : specs) {
    Scope s;
    size_t colon = spec.find(':');
    s.topic = spec.substr(0, colon);
    if (s.topic.empty()) return usage_error("-t '{}': the topic is missing", spec);
    if (colon != std::string::npos) {
      auto parts = parse_partition_list(std::string_view(spec).substr(colon + 1));
      if (!parts) return parts.take_error();
      s.partitions = std::move(*parts);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

Status run_checkpoint_commit(const CheckpointOptions& o, Io& io) {
  auto store = open_state(o);
  if (!store) return store.take_error();
  auto interval = parse_duration(o.checkpoint_interval);
  if (!interval) return usage_error("--checkpoint-interval: {}", interval.error().message);
  ErrorOptions errors;  // the commit stage reads any line: nothing is bad input
  auto bad = make_bad_input_handler(errors, stage_name(io.program, o.name), io);
  if (!bad) return bad.take_error();
  CommitStage stage(**store, stage_name(io.program, o.name), o.passthrough, *interval, io);
  FilterSettings settings{o.input, 0};
  return run_filter(stage, settings, **bad, io);
}

Status run_checkpoint_show(const CheckpointOptions& o, Io& io) {
  auto table = use_table(o, io);
  if (!table) return table.take_error();
  auto store = open_state(o);
  if (!store) return store.take_error();
  auto offsets = (*store)->offsets();
  if (!offsets) return offsets.take_error();
  if (!*table) {
    for (const auto& s : *offsets) append_offset_json(io.out.buffer(), s);
    return {};
  }
  TextTable t({"TOPIC", "PARTITION", "OFFSET", "CHECKPOINT", "COMMITTED-AT"});
  for (const auto& s : *offsets)
    t.add_row({s.topic, std::to_string(s.partition), std::to_string(s.offset),
               s.checkpoint > 0 ? std::to_string(s.checkpoint) : "-", format_rfc3339(s.committed_at)});
  io.out.write(t.render());
  return {};
}

Status run_checkpoint_history(const CheckpointOptions& o, Io& io) {
  auto table = use_table(o, io);
  if (!table) return table.take_error();
  auto store = open_state(o);
  if (!store) return store.take_error();
  auto checkpoints = (*store)->checkpoints();
  if (!checkpoints) return checkpoints.take_error();
  auto snapshots = (*store)->snapshots();
  if (!snapshots) return snapshots.take_error();
  std::map<int64_t, std::vector<SnapshotRecord>> by_checkpoint;
  for (const auto& s : *snapshots) by_checkpoint[s.checkpoint].push_back(s);
  TextTable t({"CHECKPOINT", "EMITTED-AT", "COMPLETED-AT", "BY", "PARTITIONS", "SNAPSHOTS", "ENTRIES", "BYTES"});
  std::string& out = io.out.buffer();
  for (const auto& c : *checkpoints) {
    const auto& snaps = by_checkpoint[c.id];
    int64_t entries = 0, bytes = 0;
    for (const auto& s : snaps) {
      entries += s.entries;
      bytes += s.bytes;
    }
    if (*table) {
      t.add_row({std::to_string(c.id), format_rfc3339(c.emitted_at),
                 c.completed_at ? format_rfc3339(*c.completed_at) : "-", c.completed_by.empty() ? "-" : c.completed_by,
                 std::to_string(c.partitions), std::to_string(snaps.size()), std::to_string(entries),
                 std::to_string(bytes)});
      continue;
    }
    out.append("{\"checkpoint\":");
    append_int(out, c.id);
    out.append(",\"emitted_at\":\"");
    append_rfc3339(out, c.emitted_at);
    out.append("\",\"completed_at\":");
    if (c.completed_at) {
      out.push_back('"');
      append_rfc3339(out, *c.completed_at);
      out.push_back('"');
    } else {
      out.append("null");
    }
    out.append(",\"completed_by\":");
    if (c.completed_by.empty()) {
      out.append("null");
    } else {
      append_json_string(out, c.completed_by);
    }
    out.append(",\"partitions\":");
    append_int(out, c.partitions);
    out.append(",\"snapshots\":[");
    for (size_t i = 0; i < snaps.size(); ++i) {
      if (i > 0) out.push_back(',');
      out.append("{\"stage\":");
      append_json_string(out, snaps[i].stage);
      out.append(",\"entries\":");
      append_int(out, snaps[i].entries);
      out.append(",\"bytes\":");
      append_int(out, snaps[i].bytes);
      out.push_back('}');
    }
    out.append("]}\n");
  }
  if (*table) io.out.write(t.render());
  return {};
}

Status run_checkpoint_reset(const CheckpointOptions& o, Io& io) {
  int kinds = o.to_earliest + o.to_latest + !o.to_datetime.empty() + !o.by_duration.empty() + o.shift_by.has_value() +
              o.to_offset.has_value();
  if (kinds != 1)
    return usage_error(
        "give exactly one of --to-earliest, --to-latest, --to-datetime, --by-duration, --shift-by, --to-offset");
  if (o.dry_run && o.execute) return usage_error("--dry-run and --execute cannot be combined");
  ResetSpec spec;
  if (o.to_latest) spec.kind = ResetSpec::Kind::kLatest;
  if (o.shift_by) spec = {ResetSpec::Kind::kShift, *o.shift_by};
  if (o.to_offset) spec = {ResetSpec::Kind::kOffset, *o.to_offset};
  if (!o.to_datetime.empty()) {
    auto t = parse_time_point(o.to_datetime, io.clock.now());
    if (!t) return usage_error("--to-datetime: {}", t.error().message);
    spec = {ResetSpec::Kind::kTime, *t};
  }
  if (!o.by_duration.empty()) {
    auto d = parse_duration(o.by_duration);
    if (!d) return usage_error("--by-duration: {}", d.error().message);
    spec = {ResetSpec::Kind::kTime, io.clock.now() - *d};
  }
  auto table = use_table(o, io);
  if (!table) return table.take_error();
  auto scopes = parse_scopes(o.topics);
  if (!scopes) return scopes.take_error();
  auto store = open_state(o);
  if (!store) return store.take_error();
  auto stored = (*store)->offsets();
  if (!stored) return stored.take_error();
  std::map<TopicPartition, int64_t> current;
  for (const auto& s : *stored) current[{s.topic, s.partition}] = s.offset;

  auto config = resolve_kafka_config(o.kafka, io.env_brokers);
  if (!config) return config.take_error();
  auto client = Consumer::create(*config, "", io.reporter);
  if (!client) return client.take_error();
  std::vector<TopicPartition> parts;
  if (scopes->empty()) {
    for (const auto& [tp, off] : current) parts.push_back(tp);
  } else {
    for (const auto& scope : *scopes) {
      auto ids = (*client)->partitions(scope.topic);
      if (!ids) return ids.take_error();
      for (int32_t p : *ids) {
        if (!scope.partitions.empty() && !std::binary_search(scope.partitions.begin(), scope.partitions.end(), p))
          continue;
        parts.push_back({scope.topic, p});
      }
    }
  }
  if (parts.empty()) return usage_error("nothing to reset: the state holds no offsets; name topics with -t");
  auto marks = (*client)->watermarks(parts);
  if (!marks) return marks.take_error();
  std::vector<int64_t> at_time(parts.size(), 0);
  if (spec.kind == ResetSpec::Kind::kTime) {
    auto found = (*client)->offsets_for_times(parts, std::vector<Millis>(parts.size(), spec.value));
    if (!found) return found.take_error();
    at_time = *found;
  }
  std::vector<PartitionOffset> plan;
  TextTable t({"TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "LOG-START", "LOG-END"});
  std::string& out = io.out.buffer();
  for (size_t i = 0; i < parts.size(); ++i) {
    auto it = current.find(parts[i]);
    std::optional<int64_t> cur = it == current.end() ? std::nullopt : std::optional<int64_t>(it->second);
    int64_t target = reset_target(spec, cur, (*marks)[i].low, (*marks)[i].high, at_time[i]);
    plan.push_back({parts[i].topic, parts[i].partition, target});
    if (*table) {
      t.add_row({parts[i].topic, std::to_string(parts[i].partition), cur ? std::to_string(*cur) : "-",
                 std::to_string(target), std::to_string((*marks)[i].low), std::to_string((*marks)[i].high)});
      continue;
    }
    out.append("{\"topic\":");
    append_json_string(out, parts[i].topic);
    out.append(",\"partition\":");
    append_int(out, parts[i].partition);
    out.append(",\"current\":");
    if (cur) {
      append_int(out, *cur);
    } else {
      out.append("null");
    }
    out.append(",\"offset\":");
    append_int(out, target);
    out.append("}\n");
  }
  if (*table) io.out.write(t.render());
  if (!o.execute) {
    io.reporter.warning("dry run: nothing changed; add --execute to apply this plan");
    return {};
  }
  KPIPE_TRY((*store)->set_offsets(plan, io.clock.now()));
  io.reporter.info(fmt::format("reset {} partitions", plan.size()));
  return {};
}

Status run_checkpoint_export(const CheckpointOptions& o, Io& io) {
  CheckpointOptions ndjson = o;
  ndjson.format = "ndjson";
  return run_checkpoint_show(ndjson, io);
}

Status run_checkpoint_import(const CheckpointOptions& o, Io& io) {
  auto store = open_state(o);
  if (!store) return store.take_error();
  FieldSet fields;
  fields.add(FieldPath::parse(".topic").value());
  fields.add(FieldPath::parse(".partition").value());
  fields.add(FieldPath::parse(".offset").value());
  LineFeed inputs(o.input.inputs, o.input.max_line_bytes, &fields);
  std::vector<PartitionOffset> offsets;
  Line line;
  const ParsedLine* parsed = nullptr;
  // Every line is checked before anything changes: an import is all or
  // nothing.
  for (;;) {
    auto more = inputs.next(line, parsed);
    if (!more) return more.take_error();
    if (!*more) break;
    if (is_blank_line(line.text) || is_control_line(line.text)) continue;
    auto where = [&](std::string_view why) { return data_error("{}: line {}: {}", line.input, line.number, why); };
    if (line.too_long) return where(fmt::format("line is longer than {} bytes (--max-line-bytes)", o.input.max_line_bytes));
    if (!parsed->status.ok()) return where(parsed->status.error().message);
    const JsonField* v = parsed->values;
    if (v[0].type != JsonType::kString) return where("field 'topic' is missing or not a string");
    if (v[1].type != JsonType::kNumber || !v[1].is_integer || v[1].integer < 0)
      return where("field 'partition' is missing or not a non-negative integer");
    if (v[2].type != JsonType::kNumber || !v[2].is_integer || v[2].integer < 0)
      return where("field 'offset' is missing or not a non-negative integer");
    offsets.push_back({std::string(v[0].str), static_cast<int32_t>(v[1].integer), v[2].integer});
  }
  KPIPE_TRY((*store)->set_offsets(offsets, io.clock.now()));
  io.reporter.info(fmt::format("imported {} offsets", offsets.size()));
  return {};
}

Status run_checkpoint_sync(const CheckpointOptions& o, Io& io) {
  if (o.to_group.empty() == o.from_group.empty()) return usage_error("give one of --to-group G or --from-group G");
  auto store = open_state(o);
  if (!store) return store.take_error();
  auto config = resolve_kafka_config(o.kafka, io.env_brokers);
  if (!config) return config.take_error();
  const std::string& group = o.to_group.empty() ? o.from_group : o.to_group;
  auto consumer = Consumer::create(*config, group, io.reporter);
  if (!consumer) return consumer.take_error();
  auto stored = (*store)->offsets();
  if (!stored) return stored.take_error();
  if (!o.to_group.empty()) {
    std::vector<PartitionOffset> commit;
    for (const auto& s : *stored) commit.push_back({s.topic, s.partition, s.offset});
    if (commit.empty()) return usage_error("the state holds no offsets to copy");
    Status s = (*consumer)->commit(commit);
    if (!s.ok())
      return failure("{} (a group with active members refuses outside commits: stop its consumers first)",
                     s.error().message);
    io.reporter.info(fmt::format("copied {} offsets to group '{}'", commit.size(), group));
    return {};
  }
  auto scopes = parse_scopes(o.topics);
  if (!scopes) return scopes.take_error();
  std::set<TopicPartition> parts;
  for (const auto& s : *stored) parts.insert({s.topic, s.partition});
  for (const auto& scope : *scopes) {
    auto ids = (*consumer)->partitions(scope.topic);
    if (!ids) return ids.take_error();
    for (int32_t p : *ids)
      if (scope.partitions.empty() || std::binary_search(scope.partitions.begin(), scope.partitions.end(), p))
        parts.insert({scope.topic, p});
  }
  if (parts.empty()) return usage_error("name the topics to copy with -t TOPIC");
  std::vector<TopicPartition> list(parts.begin(), parts.end());
  auto committed = (*consumer)->committed(list);
  if (!committed) return committed.take_error();
  std::vector<PartitionOffset> copy;
  for (size_t i = 0; i < list.size(); ++i)
    if ((*committed)[i]) copy.push_back({list[i].topic, list[i].partition, *(*committed)[i]});
  if (copy.empty()) return failure("group '{}' has no committed offsets for these topics", group);
  KPIPE_TRY((*store)->set_offsets(copy, io.clock.now()));
  io.reporter.info(fmt::format("copied {} offsets from group '{}'", copy.size(), group));
  return {};
}

Status run_checkpoint_verify(const CheckpointOptions& o, Io& io) {
  auto store = open_state(o);
  if (!store) return store.take_error();
  auto problems = (*store)->verify();
  if (!problems) return problems.take_error();
  for (const auto& p : *problems) io.out.write_line(p);
  if (!problems->empty())
    return failure("state database '{}' has {} problem{}", o.state, problems->size(), problems->size() == 1 ? "" : "s");
  io.reporter.info(fmt::format("state database '{}' is sound", o.state));
  return {};
}

}  // namespace kpipe
