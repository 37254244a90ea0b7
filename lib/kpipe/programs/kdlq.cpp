#include "kpipe/programs/kdlq.h"
#include "kpipe/stats.h"

#include "kpipe/choices.h"
#include "kpipe/dlq_entry.h"
#include "kpipe/dlq_replay.h"
#include "kpipe/guard.h"
#include "kpipe/kafka/kafka_log.h"
#include "kpipe/kinesis/kinesis_log.h"
#include "kpipe/programs/dlq_targets.h"
#include "kpipe/store/dlq_store.h"
#include "kpipe/store/replay_positions.h"
#include "kpipe/target.h"

namespace kpipe {

namespace {

// The store behind --dlq.
struct Store {
  std::unique_ptr<DeadLetters> letters;
  std::string name;  // as the user wrote it
};

Expected<KafkaLog> open_kafka(const DlqOptions& o, Io& io, std::string_view what) {
  auto log = KafkaLog::open(o.kafka, io.env_brokers, io.reporter, io.clock);
  if (!log) return usage_error("{} needs brokers: {}", what, log.error().message);
  return log;
}

// A Kinesis dead-letter stream, its replay position kept in --state
// under the ledger --group names (kdlq(1)). `replays`: a replay, which
// needs --state; the other commands read the ledger when given one.
Expected<Store> open_stream_store(const DlqOptions& o, Io& io, bool read_only, bool replays) {
  auto name = parse_kinesis_target(o.dlq);
  if (!name) return name.take_error();
  if (replays && o.state.empty())
    return usage_error(
        "--dlq '{}': a replay of a Kinesis dead-letter stream keeps its position in --state STORE "
        "(an SQLite file or postgresql://...)",
        o.dlq);
  if (!o.group.empty() && o.state.empty())
    return usage_error("--group names a replay ledger in --state STORE, which is missing");
  auto stream = KinesisLog::open(o.kinesis, o.dlq, o.kafka.timeout, io.reporter, io.clock);
  if (!stream) return stream.take_error();
  std::unique_ptr<ReplayPositions> positions;
  if (!o.state.empty()) {
    std::string log = std::string(kKinesisPrefix) + name->name;
    auto stored = StoredReplayPositions::open(
        o.state, o.group.empty() ? default_replay_ledger(name->name) : o.group, log, read_only);
    if (!stored) return stored.take_error();
    positions = std::move(*stored);
  }
  auto letters = stream->dead_letters(std::move(positions));
  if (!letters) return letters.take_error();
  return Store{std::move(*letters), o.dlq};
}

// `mode`: DlqStore::Mode::kRead for the commands that only read, which a
// user who may only read the store can run (kdlq(1)).
// `replays`: a Kafka store's replay group is committed to, not only read
// (KafkaLog::dead_letters).
Expected<Store> open_store(const DlqOptions& o, Io& io,
                           DlqStore::Mode mode = DlqStore::Mode::kExisting, bool replays = false) {
  Store s;
  s.name = o.dlq;
  if (o.dlq.empty())
    return usage_error("--dlq FILE.db, --dlq kafka:TOPIC or --dlq kinesis:STREAM is required");
  if (is_kinesis_target(o.dlq))
    return open_stream_store(o, io, mode == DlqStore::Mode::kRead, replays);
  if (!o.state.empty())
    return usage_error(
        "--state is for a Kinesis dead-letter stream's replay position, not for '{}'", o.dlq);
  Target target = parse_target(o.dlq);
  if (target.kind != TargetKind::kKafka) {
    if (!o.group.empty())
      return usage_error("--group is for a Kafka dead-letter topic, not '{}'", o.dlq);
    auto store = DlqStore::open(o.dlq, mode);
    if (!store) return store.take_error();
    s.letters = make_store_dead_letters(std::move(*store));
    return s;
  }
  const std::string& topic = target.location;
  if (topic.empty()) return usage_error("--dlq 'kafka:': the topic name is missing");
  auto log = open_kafka(o, io, fmt::format("--dlq '{}'", o.dlq));
  if (!log) return log.take_error();
  auto letters = log->dead_letters(topic, o.group, replays);
  if (!letters) return letters.take_error();
  s.letters = std::move(*letters);
  return s;
}

Expected<DlqFilter> make_filter(const DlqOptions& o, Millis now) {
  DlqFilter f;
  f.reason = o.reason;
  f.stage = o.stage;
  f.source_topic = o.source_topic;
  if (!o.since.empty()) {
    auto t = parse_time_point(o.since, now);
    if (!t) return usage_error("--since: {}", t.error().message);
    f.since = *t;
  }
  if (!o.until.empty()) {
    auto t = parse_time_point(o.until, now);
    if (!t) return usage_error("--until: {}", t.error().message);
    f.until = *t;
  }
  return f;
}

// As kcheckpoint and klag: a table for a person at a terminal, NDJSON for
// a pipe, unless --format says.
Expected<bool> parse_ndjson_format(const std::string& format, const Io& io) {
  if (format.empty()) return !io.interactive;
  auto i = parse_choice("--format", format, {"table", "ndjson"});
  if (!i) return i.take_error();
  return *i == 1;
}

// Every entry matching `filter`, at most `limit` (0: all), in order,
// until the reader of the output goes.
Status for_each_entry(Store& store, const DlqFilter& filter, size_t limit, bool with_payload,
                      Io& io, const std::function<Status(const DlqEntry&)>& fn) {
  return store.letters->scan(filter, limit, with_payload, [&](const DlqEntry& e) -> Expected<bool> {
    if (io.out.closed()) return false;
    KPIPE_TRY(fn(e));
    return true;
  });
}

Status list_entries(Store& store, const DlqFilter& filter, size_t limit, bool ndjson, Io& io) {
  TextTable table = make_entry_table();
  KPIPE_TRY(for_each_entry(store, filter, limit, true, io, [&](const DlqEntry& e) -> Status {
    if (!ndjson) {
      add_entry_row(table, e);
      return {};
    }
    append_entry_ndjson(io.out.buffer(), e);
    return io.out.end_record();
  }));
  if (!ndjson) io.out.buffer().append(table.render());
  return io.out.flush();
}

std::string count_text(int64_t n) {
  return fmt::format("{} entr{}", n, n == 1 ? "y" : "ies");
}

}  // namespace

Status run_dlq_list(const DlqOptions& o, Io& io) {
  auto ndjson = parse_ndjson_format(o.format, io);
  if (!ndjson) return ndjson.take_error();
  auto filter = make_filter(o, io.clock.now());
  if (!filter) return filter.take_error();
  auto store = open_store(o, io, DlqStore::Mode::kRead);
  if (!store) return store.take_error();
  return list_entries(*store, *filter, o.limit, *ndjson, io);
}

Status run_dlq_stats(const DlqOptions& o, Io& io) {
  auto ndjson = parse_ndjson_format(o.format, io);
  if (!ndjson) return ndjson.take_error();
  auto by = DlqStats::parse_by(o.by);
  if (!by) return by.take_error();
  auto filter = make_filter(o, io.clock.now());
  if (!filter) return filter.take_error();
  auto store = open_store(o, io, DlqStore::Mode::kRead);
  if (!store) return store.take_error();
  DlqStats stats(*by);
  KPIPE_TRY(for_each_entry(*store, *filter, o.limit, false, io, [&](const DlqEntry& e) -> Status {
    stats.add(e);
    return {};
  }));
  if (*ndjson) {
    stats.render_ndjson(io.out.buffer());
  } else {
    stats.render_table(io.out.buffer());
  }
  return io.out.flush();
}

namespace {

// Standard output as a replay target: an entry is delivered once the
// reader has read its line, not when write() returned: a line that only
// reached the pipe dies with a reader that dies (kpipe(7), CONTROL LINES
// AND CHECKPOINTS). One line at a time is in the pipe, so that even a
// reader that reads ahead (head) gets no line it did not ask for, and a
// kill repeats at most that one line.
class StdoutTarget final : public ReplayTarget {
 public:
  explicit StdoutTarget(Output& out) : out_(out) {}
  std::string describe() const override { return "<stdout>"; }
  bool acknowledges_later() const override { return false; }
  Expected<bool> send(const ReplayItem& item, uint64_t) override {
    if (out_.closed()) return false;
    out_.write_line(item.entry.payload);
    auto read = out_.wait_delivered(out_.end_position());
    if (!read) return read.take_error();
    return *read == Output::Drain::kDelivered;
  }
  Status flush(std::vector<uint64_t>&) override { return {}; }
  Expected<std::string> mark() override { return std::string(); }
  Expected<std::set<std::string>> delivered_since(const std::string&, const std::string&,
                                                  const std::vector<ReplayItem>&) override {
    return std::set<std::string>();
  }

 private:
  Output& out_;
};

}  // namespace

Status run_dlq_replay(const DlqOptions& o, Io& io) {
  auto ndjson = parse_ndjson_format(o.format, io);
  if (!ndjson) return ndjson.take_error();
  auto filter = make_filter(o, io.clock.now());
  if (!filter) return filter.take_error();
  if (o.batch == 0) return usage_error("--batch must be at least 1");
  std::string to_topic;
  bool to_kinesis = is_kinesis_target(o.to);
  if (to_kinesis) {
    auto name = parse_kinesis_target(o.to);
    if (!name) return name.take_error();
    // Its records would come back as dead letters, for the next replay.
    if (is_kinesis_target(o.dlq)) {
      auto from = parse_kinesis_target(o.dlq);
      if (from && from->name == name->name &&
          (from->region.empty() || name->region.empty() || from->region == name->region))
        return usage_error("--to '{}' is the dead-letter stream itself", o.to);
    }
  } else if (!o.to.empty()) {
    Target to = parse_target(o.to);
    if (to.kind != TargetKind::kKafka || to.location.empty())
      return usage_error(
          "--to '{}': expected kafka:TOPIC or kinesis:STREAM (without --to, entries go to "
          "standard output)",
          o.to);
    to_topic = std::move(to.location);
  }
  // A log's replay position passes over what the filters leave out.
  const bool topic = is_kafka_target(o.dlq);
  if ((topic || is_kinesis_target(o.dlq)) && filter->narrows() && o.group.empty() && !o.dry_run)
    return usage_error(
        "a filtered replay of {} needs its own --group: the replay position is {}, and the "
        "entries the filters pass over would count as replayed",
        topic ? "a Kafka dead-letter topic" : "a Kinesis dead-letter stream",
        topic ? "an offset" : "a sequence number in each shard");
  auto store = open_store(o, io, DlqStore::Mode::kExisting, /*replays=*/true);
  if (!store) return store.take_error();

  if (o.dry_run) {
    DlqFilter pending = *filter;
    pending.pending_only = !o.again;
    return list_entries(*store, pending, o.limit, *ndjson, io);
  }

  if (!to_topic.empty() && to_topic == store->letters->topic())
    return usage_error("--to '{}' is the dead-letter topic itself", o.to);
  std::unique_ptr<ReplayTarget> target;
  if (to_kinesis) {
    auto stream = KinesisLog::open(o.kinesis, o.to, o.kafka.timeout, io.reporter, io.clock);
    if (!stream) return stream.take_error();
    auto made = stream->replay_target();
    if (!made) return made.take_error();
    target = std::move(*made);
  } else if (to_topic.empty()) {
    target = std::make_unique<StdoutTarget>(io.out);
  } else {
    auto log = open_kafka(o, io, fmt::format("--to '{}'", o.to));
    if (!log) return log.take_error();
    auto made = log->replay_target(to_topic);
    if (!made) return made.take_error();
    target = std::move(*made);
  }
  auto ledger = store->letters->replay_ledger(*filter, o.limit, io.clock);
  if (!ledger) return ledger.take_error();
  ReplaySettings settings;
  settings.batch = o.batch;
  settings.again = o.again;
  settings.stop = io.stop;
  // On a terminal: entries replayed, the rate, and how many are left.
  StatsTicker ticker("kdlq replay", StatsSettings{}, io.reporter, io.clock);
  Counters counters;
  if (io.reporter.wants_progress())
    settings.on_progress = [&](uint64_t replayed, std::optional<uint64_t> total) {
      counters.in = counters.out = replayed;
      if (total) counters.left = *total > replayed ? *total - replayed : 0;
      ticker.tick_now(counters);
    };
  auto report = run_replay(**ledger, *target, settings);
  if (settings.on_progress) ticker.finish(counters);
  if (!report) return report.take_error();
  if (report->batches_in_doubt > 0)
    io.reporter.info(
        fmt::format("settled an interrupted replay: {} found at {} and marked replayed",
                    count_text(static_cast<int64_t>(report->found_delivered)), target->describe()));
  io.reporter.info(fmt::format(
      "replayed {} to {}", count_text(static_cast<int64_t>(report->replayed)), target->describe()));
  return {};
}

Status run_dlq_purge(const DlqOptions& o, Io& io) {
  if (is_kinesis_target(o.dlq))
    return usage_error(
        "--dlq '{}': a stream deletes nothing; its entries expire with its retention period",
        o.dlq);
  if (!o.replayed && o.older_than.empty())
    return usage_error(
        "say what to purge: --replayed, --older-than D, or both (entries that are both)");
  std::optional<Millis> before;
  if (!o.older_than.empty()) {
    auto d = parse_duration(o.older_than);
    if (!d) return usage_error("--older-than: {}", d.error().message);
    before = io.clock.now() - *d;
  }
  auto store = open_store(o, io);
  if (!store) return store.take_error();
  auto n = store->letters->purge(o.replayed, before, o.dry_run);
  if (!n) return n.take_error();
  io.out.write_line(fmt::format("{} {} from {}", o.dry_run ? "would purge" : "purged",
                                count_text(*n), store->name));
  return io.out.flush();
}

Status run_dlq_guard(const DlqOptions& o, Io& io) {
  if (o.require.empty()) return usage_error("give at least one --require PATH[:TYPE]");
  std::vector<Requirement> requirements;
  for (const std::string& text : o.require) {
    auto r = parse_requirement(text);
    if (!r) return r.take_error();
    requirements.push_back(std::move(*r));
  }
  auto stats = parse_stats(o.stats, stage_name("kdlq-guard", o.name));
  if (!stats) return stats.take_error();
  ErrorOptions errors = o.errors;
  // The guard's job is to send bad records to the store: with --dlq and
  // no --on-error, that is what it does.
  if (!o.on_error_given) errors.on_error = errors.dlq.empty() ? "fail" : "dlq";
  std::optional<KafkaLog> log;
  if (is_kafka_target(errors.dlq)) {
    auto opened = open_kafka(o, io, fmt::format("--dlq '{}'", errors.dlq));
    if (!opened) return opened.take_error();
    log = std::move(*opened);
  }
  auto bad = make_bad_input_handler(errors, stage_name("kdlq-guard", o.name), io,
                                    log ? &*log : nullptr, &o.kinesis);
  if (!bad) return bad.take_error();
  GuardStage stage(std::move(requirements));
  FilterSettings settings{o.input, std::move(*stats)};
  return run_filter(stage, settings, **bad, io);
}

Status GuardStage::on_line(const Line& line, Output& out) {
  KPIPE_TRY(guard_.check(line.text));
  out.write_line(line.text);
  ++passed_;
  return {};
}

}  // namespace kpipe
