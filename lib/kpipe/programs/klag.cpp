#include "kpipe/programs/klag.h"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "kpipe/choices.h"
#include "kpipe/kafka/kafka_log.h"
#include "kpipe/lag.h"
#include "kpipe/lag_format.h"
#include "kpipe/lag_plot.h"
#include "kpipe/programs/plot_output.h"
#include "kpipe/store/lag_history.h"
#include "kpipe/store/state_store.h"
#include "kpipe/target.h"

namespace kpipe {

namespace {

enum class Format { kTable, kNdjson, kPrometheus };

// Samples kept for sparklines (the rules need window + 1 of them).
constexpr size_t kTrendSamples = 30;

struct Settings {
  Format format = Format::kNdjson;
  Millis watch = 0;
  Millis keep = 0;
  RuleSettings rules;
  Uncommitted uncommitted = Uncommitted::kEarliest;
  PrometheusOptions output;  // its granularity is the other formats' too
  // --plot's series: by group unless --granularity was given.
  LagSeriesBy plot_by = LagSeriesBy::kGroup;
  AlertSettings alerts;
  GroupSelector groups;
  // The groups named, or the state file; a pattern's groups, and every
  // group's with --all-groups, are known once the cluster is asked.
  std::vector<LagSubject> subjects;
  // -t kinesis:NAME: the stream whose shards a state file's positions are
  // in (klag(1), Kinesis); empty for Kafka.
  std::string stream;
  size_t depth() const { return std::max(rules.window + 1, kTrendSamples); }
};

// -t kinesis:NAME: a Kinesis stream, read with a state file's positions.
// Its lag is in time alone (PartitionSample::by_time), so what counts
// records cannot be asked of it.
Status resolve_stream(const LagOptions& o, Settings& s) {
  size_t streams = std::count_if(o.topics.begin(), o.topics.end(),
                                 [](const std::string& t) { return is_kinesis_target(t); });
  if (streams == 0) return {};
  if (streams != o.topics.size() || streams > 1)
    return usage_error("-t kinesis:NAME reads one Kinesis stream: give it alone");
  auto name = parse_kinesis_target(o.topics.front());
  if (!name) return name.take_error();
  if (o.state.empty() || o.status_only)
    return usage_error(
        "a Kinesis stream has no consumer groups: its lag is that of a pipeline's --state STORE");
  if (o.no_fetch)
    return usage_error(
        "--no-fetch estimates from end offsets, which a Kinesis shard has none of: its lag is "
        "read from the shard");
  if (o.max_lag)
    return usage_error(
        "--max-lag counts records, which a Kinesis shard's sequence numbers do not: give "
        "--max-lag-seconds");
  if (o.allowed_lag != 0)
    return usage_error(
        "--allowed-lag counts records, which a Kinesis shard's sequence numbers do not");
  s.stream = name->name;
  return {};
}

Expected<Settings> resolve(const LagOptions& o, const Io& io) {
  Settings s;
  bool groups = !o.groups.empty() || o.all_groups;
  if (!groups && o.state.empty()) return usage_error("give -g GROUP or --state FILE");
  if (groups && !o.state.empty()) return usage_error("give -g GROUP or --state FILE, not both");
  if (o.all_groups && !o.groups.empty())
    return usage_error("--all-groups takes every group: give no -g with it");
  auto selector = GroupSelector::create(o.groups, o.all_groups);
  if (!selector) return selector.take_error();
  s.groups = std::move(*selector);
  for (const auto& g : s.groups.names()) s.subjects.push_back({LagSubject::Kind::kGroup, g});
  // A PostgreSQL target is shown, in messages, output and history, without
  // its password (kpipe(7), STORES); the Sampler opens o.state itself.
  if (!o.state.empty()) s.subjects.push_back({LagSubject::Kind::kState, display_target(o.state)});
  if (o.format.empty()) {
    s.format = io.interactive ? Format::kTable : Format::kNdjson;
  } else {
    auto f = parse_choice("--format", o.format, {"table", "ndjson", "prometheus"});
    if (!f) return f.take_error();
    s.format = static_cast<Format>(*f);
  }
  // Not given: a row per partition in the tables, and a series per group
  // in a picture, where a hundred partitions would hide the trend.
  auto granularity = parse_granularity(o.granularity.empty() ? "partition" : o.granularity);
  if (!granularity) return granularity.take_error();
  s.output.granularity = *granularity;
  if (!o.granularity.empty())
    s.plot_by = *granularity == Granularity::kTopic ? LagSeriesBy::kTopic : LagSeriesBy::kPartition;
  auto names = parse_metric_names(o.metric_names);
  if (!names) return names.take_error();
  s.output.names = *names;
  if (s.output.names == MetricNames::kKafkaExporter) {
    if (s.format != Format::kPrometheus)
      return usage_error("--metric-names names the metrics of --format prometheus: give that too");
    if (!o.state.empty())
      return usage_error(
          "--metric-names kafka_exporter labels consumer groups, not a state file: give -g");
  }
  KPIPE_TRY(resolve_stream(o, s));
  auto uncommitted = parse_uncommitted(o.uncommitted);
  if (!uncommitted) return uncommitted.take_error();
  s.uncommitted = *uncommitted;
  if (o.window < 2) return usage_error("--window must be at least 2 (the rules compare samples)");
  s.rules.window = static_cast<size_t>(o.window);
  if (o.allowed_lag < 0) return usage_error("--allowed-lag must not be negative");
  s.rules.allowed_lag = o.allowed_lag;
  if (o.max_lag && *o.max_lag < 0) return usage_error("--max-lag must not be negative");
  if (o.max_lag_seconds && !(*o.max_lag_seconds >= 0))
    return usage_error("--max-lag-seconds must not be negative");
  s.alerts.max_lag = o.max_lag;
  s.alerts.max_lag_seconds = o.max_lag_seconds;
  if (!o.fail_on.empty()) {
    auto f = parse_fail_on(o.fail_on);
    if (!f) return f.take_error();
    s.alerts.fail_on = *f;
  }
  if (o.plot.given && o.history.empty())
    return usage_error("--plot draws the samples of --history FILE: give one");
  if (o.plot.given && !o.format.empty())
    return usage_error("--plot and --format cannot be combined: the picture replaces the report");
  if (o.plot.given && !o.watch.empty())
    return usage_error("--plot draws the history once: give no --watch");
  if (o.status_only) {
    if (o.history.empty())
      return usage_error("status judges the samples of --history FILE: give one");
    return s;
  }
  if (!o.watch.empty()) {
    auto w = parse_duration(o.watch);
    if (!w) return usage_error("--watch: {}", w.error().message);
    if (*w <= 0) return usage_error("--watch must be longer than 0s");
    s.watch = *w;
    if (s.format == Format::kPrometheus)
      return usage_error(
          "--watch cannot write --format prometheus (one file per sample: run klag from cron or a "
          "timer)");
  }
  auto keep = parse_duration(o.keep);
  if (!keep) return usage_error("--keep: {}", keep.error().message);
  s.keep = *keep;
  if (o.no_fetch && o.history.empty())
    return usage_error(
        "--no-fetch estimates the lag in seconds from the end offsets of --history FILE: give one");
  return s;
}

// A state's position read as a Kafka offset that is not one: the user
// has left out -t kinesis:NAME.
Error not_kafka_offset(const StoredOffset& p) {
  return failure(
      "{} [{}] is kept at {}, not at a Kafka offset: for a Kinesis stream, give -t kinesis:{}",
      p.topic, p.partition, p.offset, p.topic);
}

// Where one subject's offsets come from, and the broker behind them.
class Sampler {
 public:
  // `listed`: a group found by listing the cluster's (a -g pattern,
  // --all-groups), not named.
  Sampler(const LagOptions& options, LagSubject subject, bool listed, LagEngine& engine,
          LagHistory* history, Io& io)
      : options_(options),
        subject_(std::move(subject)),
        listed_(listed),
        engine_(engine),
        history_(history),
        io_(io) {}

  // After sample() failed: whether only because the group has nothing to
  // show (it does not exist, or has committed nothing and has no member
  // assigned anything), which ends no run over listed groups.
  bool empty() const { return empty_; }
  bool listed() const { return listed_; }

  Expected<LagSample> sample(KafkaLog& log) {
    if (!reader_) {
      // The lag in seconds reads a record of each lagging partition: what
      // a refused topic asks for, unless --no-fetch (kpipe(7), SECURITY).
      auto reader = log.group_lag(is_group() ? subject_.name : std::string(), !options_.no_fetch);
      if (!reader) return reader.take_error();
      reader_ = std::move(*reader);
    }
    empty_ = false;
    std::vector<PartitionReading> readings;
    std::optional<int64_t> members;
    std::string group_state;
    if (is_group()) {
      auto found = read_group(log, readings, members, group_state);
      if (!found.ok()) return found.take_error();
    } else {
      KPIPE_TRY(read_state(readings));
    }
    std::vector<TopicPartition> parts;
    for (const auto& r : readings) parts.push_back({r.topic, r.partition});
    auto marks = reader_->bounds(parts);
    if (!marks) return marks.take_error();
    std::vector<PartitionOffset> lagging;
    std::vector<size_t> lagging_index;
    for (size_t i = 0; i < readings.size(); ++i) {
      auto& r = readings[i];
      r.end = (*marks)[i].high;
      r.start = (*marks)[i].low;
      auto from = read_offset(r, engine_.uncommitted());
      if (!from) continue;
      lagging.push_back({r.topic, r.partition, *from});
      lagging_index.push_back(i);
    }
    warn_uncommitted(readings);
    std::map<TopicPartition, std::vector<EndOffsetSeen>> timelines;
    if (options_.no_fetch) {
      for (const auto& p : lagging) {
        auto seen = history_->end_offsets_around({p.topic, p.partition}, p.offset.offset());
        if (!seen) return seen.take_error();
        timelines[{p.topic, p.partition}] = std::move(*seen);
      }
    } else {
      std::vector<std::optional<int64_t>> ends;
      auto stamps = reader_->record_timestamps(lagging, &ends);
      if (!stamps) return stamps.take_error();
      for (size_t k = 0; k < lagging.size(); ++k) {
        auto& r = readings[lagging_index[k]];
        r.record_timestamp = (*stamps)[k];
        // Nothing to read up to the end: what lies between the committed
        // (or assumed) offset and the end is transaction markers (and
        // aborted records), not lag (klag(1), Lag in seconds). Its end is
        // then the end of its records.
        int64_t from = r.committed ? r.committed->offset() : *r.start;
        if (ends[k] && *ends[k] >= r.end && lagging[k].offset == from) r.end = from;
      }
    }
    return engine_.sample(subject_, members, std::move(group_state), readings, timelines);
  }

  // A state file's positions on a Kinesis stream: each shard's lag is the
  // age of the first record after its position (klag(1), Kinesis).
  Expected<LagSample> sample(const KinesisLog& log) {
    std::vector<PartitionReading> readings;
    KPIPE_TRY(read_state(readings, log.stream()));
    std::map<int32_t, Position> from;
    std::map<int32_t, size_t> index;
    for (size_t i = 0; i < readings.size(); ++i) {
      readings[i].by_time = true;
      if (readings[i].committed) from[readings[i].partition] = *readings[i].committed;
      index[readings[i].partition] = i;
    }
    auto next = log.next_arrivals(from);
    if (!next) return next.take_error();
    // A shard the state has no position on (a child not read yet) counts
    // as --uncommitted says; one the stream no longer lists (expired) has
    // nothing left to read.
    for (const auto& n : *next) {
      auto it = index.find(n.partition);
      if (it != index.end()) {
        readings[it->second].record_timestamp = n.arrival;
        continue;
      }
      PartitionReading r;
      r.topic = log.stream();
      r.partition = n.partition;
      r.record_timestamp = n.arrival;
      r.by_time = true;
      readings.push_back(std::move(r));
    }
    warn_uncommitted(readings);
    return engine_.sample(subject_, std::nullopt, "", readings);
  }

  const LagSubject& subject() const { return subject_; }

  // A state file's newest complete checkpoint with its records' times:
  // its end-to-end latency, beside the lag.
  Status add_latency(GroupReport& report) {
    if (is_group() || !store_) return {};
    auto latest = store_->latest_latency();
    if (!latest) return latest.take_error();
    if (!*latest) return {};
    report.latency = (*latest)->latency;
    report.latency_checkpoint = (*latest)->checkpoint;
    return {};
  }

 private:
  bool is_group() const { return subject_.kind == LagSubject::Kind::kGroup; }

  Status read_group(KafkaLog& log, std::vector<PartitionReading>& readings,
                    std::optional<int64_t>& members, std::string& group_state) {
    const std::string& group = subject_.name;
    std::vector<TopicPartition> parts;
    std::set<std::string> existing;
    if (options_.topics.empty()) {
      auto all = reader_->topic_partitions();
      if (!all) return all.take_error();
      for (const auto& [topic, ids] : *all) {
        existing.insert(topic);
        for (int32_t p : ids) parts.push_back({topic, p});
      }
    } else {
      for (const auto& topic : options_.topics) {
        auto ids = reader_->partitions(topic);
        if (!ids) return ids.take_error();
        existing.insert(topic);
        for (int32_t p : *ids) parts.push_back({topic, p});
      }
    }
    auto committed = reader_->committed(parts);
    if (!committed) return committed.take_error();
    auto described = reader_->describe();
    if (!described) return described.take_error();
    bool any = std::any_of(committed->begin(), committed->end(),
                           [](const auto& c) { return c.has_value(); });
    // Without -t, and for a group found by listing: the topics the group
    // consumes. A topic it has committed on is one (all its partitions,
    // committed or not); so is a topic its members were assigned, which a
    // group that has committed nothing yet is known by. Where the broker
    // cannot describe groups (kbroker), the commits alone tell. A group
    // named with -t is shown on those topics whatever it consumes.
    bool only_consumed = options_.topics.empty() || listed_;
    std::set<std::string> used;
    if (only_consumed) {
      for (size_t i = 0; i < parts.size(); ++i)
        if ((*committed)[i]) used.insert(parts[i].topic);
      if (described->described && described->members > 0) {
        auto assigned = assigned_topics(log);
        if (!assigned) return assigned.take_error();
        for (const auto& t : *assigned)
          if (existing.count(t)) used.insert(t);
      }
    }
    if (described->described) {
      members = described->members;
      group_state = described->state;
      if (!described->exists && !any) {
        empty_ = true;
        return failure("consumer group '{}' does not exist", group);
      }
    }
    if (!any && used.empty()) {
      // A group the broker knows, asked about given topics: its partitions
      // count as --uncommitted says. Otherwise there is nothing to show.
      empty_ = only_consumed;
      if (listed_ && !options_.topics.empty())
        return failure("consumer group '{}' consumes none of {}", group, topic_list());
      // Kafka leaves the topics this principal may not describe out of
      // the topic list and out of the group's offsets, without a word.
      if (described->described && options_.topics.empty())
        return failure(
            "consumer group '{}' has committed no offsets yet, or only on topics klag may not "
            "describe (ACL needed: Describe on each of them; name one with -t)",
            group);
      if (!described->described && options_.topics.empty())
        return failure(
            "consumer group '{}' has no committed offsets: it does not exist, or has committed "
            "none yet "
            "(the broker cannot tell which)",
            group);
      if (!described->described)
        return failure(
            "consumer group '{}' has no committed offset on {} (the broker cannot tell whether the "
            "group "
            "exists)",
            group, topic_list());
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      if (only_consumed && !used.count(parts[i].topic)) continue;
      PartitionReading r;
      r.topic = parts[i].topic;
      r.partition = parts[i].partition;
      r.committed = (*committed)[i];
      readings.push_back(std::move(r));
    }
    return {};
  }

  // `stream`: a Kinesis stream's shards, whose positions are sequence
  // numbers; empty: Kafka's partitions, at offsets.
  Status read_state(std::vector<PartitionReading>& readings, const std::string& stream = {}) {
    if (!store_) {
      auto store = StateStore::open(options_.state);
      if (!store) return store.take_error();
      store_ = std::move(*store);
    }
    auto offsets = store_->offsets();
    if (!offsets) return offsets.take_error();
    std::set<std::string> wanted(options_.topics.begin(), options_.topics.end());
    if (!stream.empty()) wanted = {stream};
    for (const auto& o : *offsets) {
      if (!wanted.empty() && !wanted.count(o.topic)) continue;
      PartitionReading r;
      r.topic = o.topic;
      r.partition = o.partition;
      if (stream.empty() && !o.offset.is_offset()) return not_kafka_offset(o);
      r.committed = o.offset;
      r.committed_at = o.committed_at;
      readings.push_back(std::move(r));
    }
    if (readings.empty())
      return failure(
          "state file '{}' holds no offsets{}: no checkpoint of the pipeline is complete yet",
          subject_.name,
          !stream.empty()  ? fmt::format(" on Kinesis stream '{}'", stream)
          : wanted.empty() ? ""
                           : fmt::format(" on {}", topic_list()));
    return {};
  }

  // The topics the group's members were assigned (DescribeGroups), asked
  // through a client of its own, made once.
  Expected<std::vector<std::string>> assigned_topics(KafkaLog& log) {
    if (!admin_) {
      auto admin = log.group_directory();
      if (!admin) return admin.take_error();
      admin_ = std::move(*admin);
    }
    auto m = admin_->members(subject_.name);
    if (!m) return m.take_error();
    std::vector<std::string> out;
    for (const auto& tp : m->assigned)
      if (out.empty() || out.back() != tp.topic) out.push_back(tp.topic);
    return out;
  }

  // Partitions without a committed offset count as --uncommitted says:
  // say so once, per topic.
  void warn_uncommitted(const std::vector<PartitionReading>& readings) {
    if (warned_) return;
    warned_ = true;
    std::map<std::string, std::vector<int32_t>> missing;
    for (const auto& r : readings)
      if (!r.committed) missing[r.topic].push_back(r.partition);
    for (const auto& [topic, ids] : missing) {
      std::string list;
      for (size_t i = 0; i < ids.size() && i < 10; ++i) {
        if (i > 0) list += ',';
        list += std::to_string(ids[i]);
      }
      if (ids.size() > 10) list += ",...";
      const char* counted = "shown as -";
      if (engine_.uncommitted() == Uncommitted::kEarliest)
        counted = readings.front().by_time
                      ? "counted from the shard's start (--uncommitted earliest)"
                      : "counted from the log start offset (--uncommitted earliest)";
      if (engine_.uncommitted() == Uncommitted::kLatest)
        counted = "counted as caught up (--uncommitted latest)";
      io_.reporter.warning(fmt::format(
          "{} has no committed offset on {} partition{} of topic '{}' ({}): {}",
          subject_text(subject_), ids.size(), ids.size() == 1 ? "" : "s", topic, list, counted));
    }
  }

  std::string topic_list() const {
    std::string out;
    for (size_t i = 0; i < options_.topics.size(); ++i)
      out += fmt::format("{}'{}'", i > 0 ? ", " : "topic ", options_.topics[i]);
    return out;
  }

  const LagOptions& options_;
  LagSubject subject_;
  bool listed_;
  bool empty_ = false;
  LagEngine& engine_;
  LagHistory* history_;
  Io& io_;
  std::unique_ptr<GroupLag> reader_;
  std::unique_ptr<GroupDirectory> admin_;
  std::unique_ptr<StateStore> store_;
  bool warned_ = false;
};

void write_reports(const Settings& s, const std::vector<GroupReport>& reports, bool trend,
                   bool redraw, bool later, Output& out) {
  std::string& buf = out.buffer();
  switch (s.format) {
    case Format::kTable:
      // A terminal gets the table redrawn in place; elsewhere each sample
      // is a block of its own.
      if (redraw) {
        // Home, clear, and a heading as watch(1) writes one.
        buf += "\033[H\033[2J";
        buf += fmt::format("every {}, sampled at {}\n\n", format_duration(s.watch),
                           format_rfc3339(reports.empty() ? 0 : reports.front().at));
      } else if (later) {
        buf += '\n';
      }
      buf += render_table(reports, trend, s.output.granularity);
      break;
    case Format::kNdjson:
      for (const auto& r : reports) write_ndjson(buf, r, s.output.granularity);
      break;
    case Format::kPrometheus:
      write_prometheus(buf, reports, s.output);
      break;
  }
}

Status alert_status(const std::vector<GroupReport>& reports, const AlertSettings& alerts) {
  auto breaches = check_alerts(reports, alerts);
  if (breaches.empty()) return {};
  std::string message = breaches.front();
  for (size_t i = 1; i < breaches.size(); ++i) message += "; " + breaches[i];
  return alert(std::move(message));
}

bool stopped(const Io& io) {
  return io.stop != nullptr && io.stop->load(std::memory_order_relaxed);
}

// Waits `d` on the steady clock, waking to notice a stop signal.
void wait_for(Millis d, Io& io) {
  Millis until = io.clock.steady() + d;
  while (!stopped(io)) {
    Millis left = until - io.clock.steady();
    if (left <= 0) return;
    ::poll(nullptr, 0, static_cast<int>(std::min<Millis>(left, 100)));
  }
}

// --plot: the subjects' whole histories drawn where --plot says, instead
// of the report.
Status draw(const Settings& s, const LagOptions& o, const LagEngine& engine,
            const std::vector<std::vector<LagSample>>& histories, Io& io) {
  LagPlotOptions options;
  options.by = s.plot_by;
  options.topics = o.topics;
  options.history = o.history;
  options.depth = s.depth();
  auto chart = lag_chart(histories, engine, options);
  if (!chart) return chart.take_error();
  KPIPE_TRY(write_plot(*chart, o.plot, io));
  return io.out.flush();
}

Status run_status(const Settings& s, const LagOptions& o, LagEngine& engine, Io& io) {
  auto history = LagHistory::open(o.history, true);
  if (!history) return history.take_error();
  std::vector<LagSubject> subjects = s.subjects;
  if (s.groups.lists()) {
    // A pattern, or --all-groups: the groups the history has samples of.
    auto known = (*history)->subjects(LagSubject::Kind::kGroup);
    if (!known) return known.take_error();
    auto names = s.groups.select(*known);
    if (names.empty())
      return failure("history '{}' holds no samples of a group matching {}", o.history,
                     s.groups.describe());
    subjects.clear();
    for (auto& n : names) subjects.push_back({LagSubject::Kind::kGroup, std::move(n)});
  }
  std::vector<GroupReport> reports;
  std::vector<std::vector<LagSample>> histories;
  for (const auto& subject : subjects) {
    // A picture needs every sample; the report the last depth() of them.
    auto samples = o.plot.given ? (*history)->all(subject) : (*history)->recent(subject, s.depth());
    if (!samples) return samples.take_error();
    if (samples->empty())
      return failure("history '{}' holds no samples of {}: run klag {} {} --history {} first",
                     o.history, subject_text(subject),
                     subject.kind == LagSubject::Kind::kGroup ? "-g" : "--state", subject.name,
                     o.history);
    if (!o.plot.given) {
      reports.push_back(engine.report(*samples));
      continue;
    }
    size_t judged = std::min(samples->size(), s.depth());
    reports.push_back(engine.report(
        std::vector<LagSample>(samples->end() - static_cast<long>(judged), samples->end())));
    histories.push_back(std::move(*samples));
  }
  if (o.plot.given) {
    KPIPE_TRY(draw(s, o, engine, histories, io));
  } else {
    write_reports(s, reports, true, false, false, io.out);
    KPIPE_TRY(io.out.flush());
  }
  // The alerts decide the exit status with a picture as without one.
  return alert_status(reports, s.alerts);
}

// A state file read without -t kinesis:NAME keeps Kafka offsets: one that
// keeps a Kinesis stream's positions is said so before any broker is
// looked for (the user has forgotten -t, and has none to give).
Status check_kafka_state(const LagOptions& o) {
  auto store = StateStore::open(o.state);
  if (!store) return store.take_error();
  auto offsets = (*store)->offsets();
  if (!offsets) return offsets.take_error();
  for (const auto& p : *offsets)
    if (!p.offset.is_offset()) return not_kafka_offset(p);
  return {};
}

}  // namespace

Status run_lag(const LagOptions& o, Io& io) {
  auto settings = resolve(o, io);
  if (!settings) return settings.take_error();
  const Settings& s = *settings;
  LagEngine engine(io.clock, s.rules, s.uncommitted);
  if (o.status_only) return run_status(s, o, engine, io);

  if (!o.state.empty() && !is_postgres_target(o.state)) {
    struct stat st;
    if (::stat(o.state.c_str(), &st) != 0)
      return failure("state file '{}' does not exist", o.state);
  }
  // A Kinesis stream, or else Kafka.
  std::optional<KinesisLog> kinesis;
  std::optional<KafkaLog> kafka;
  if (!s.stream.empty()) {
    auto opened =
        KinesisLog::open(o.kinesis, o.topics.front(), o.kafka.timeout, io.reporter, io.clock);
    if (!opened) return opened.take_error();
    kinesis.emplace(std::move(*opened));
  } else {
    if (!o.state.empty()) KPIPE_TRY(check_kafka_state(o));
    auto opened = KafkaLog::open(o.kafka, io.env_brokers, io.reporter, io.clock);
    if (!opened) return opened.take_error();
    kafka.emplace(std::move(*opened));
  }
  std::unique_ptr<LagHistory> history;
  if (!o.history.empty()) {
    auto opened = LagHistory::open(o.history);
    if (!opened) return opened.take_error();
    history = std::move(*opened);
  }
  // The groups to sample, asked again each round of --watch where a
  // pattern or --all-groups lists them: groups come and go.
  std::unique_ptr<GroupDirectory> admin;
  bool unmatched_said = false;
  auto subjects = [&]() -> Expected<std::vector<LagSubject>> {
    if (!s.groups.lists()) return s.subjects;
    if (!admin) {
      auto made = kafka->group_directory();
      if (!made) return made.take_error();
      admin = std::move(*made);
    }
    auto ids = admin->group_ids();
    if (!ids) return ids.take_error();
    if (!*ids)
      return failure(
          "the broker cannot list consumer groups (kbroker answers no ListGroups), which {} needs: "
          "name the groups with -g",
          s.groups.describe());
    auto names = s.groups.select(**ids);
    if (names.size() == s.groups.names().size()) {
      if (names.empty()) return failure("no consumer group matches {}", s.groups.describe());
      if (!unmatched_said)
        io.reporter.warning(fmt::format("no consumer group matches {}", s.groups.describe()));
      unmatched_said = true;
    }
    std::vector<LagSubject> out;
    for (auto& n : names) out.push_back({LagSubject::Kind::kGroup, std::move(n)});
    return out;
  };
  std::set<std::string> named(s.groups.names().begin(), s.groups.names().end());
  std::map<LagSubject, std::unique_ptr<Sampler>> samplers;
  // Without a history, --watch keeps its samples in memory.
  std::map<LagSubject, std::vector<LagSample>> memory;
  bool trend = s.watch > 0 || history != nullptr;
  bool redraw = s.watch > 0 && io.interactive && s.format == Format::kTable;
  for (size_t round = 0;; ++round) {
    auto now = subjects();
    if (!now) return now.take_error();
    std::vector<GroupReport> reports;
    for (const auto& subject : *now) {
      auto& slot = samplers[subject];
      if (!slot) {
        bool listed = subject.kind == LagSubject::Kind::kGroup && !named.count(subject.name);
        slot = std::make_unique<Sampler>(o, subject, listed, engine, history.get(), io);
      }
      Sampler& sampler = *slot;
      auto sample = kinesis ? sampler.sample(*kinesis) : sampler.sample(*kafka);
      if (!sample && sampler.listed() && sampler.empty()) {
        // A listed group with nothing to show (one that only ever
        // described itself, or whose offsets expired) is no error.
        io.reporter.info(sample.error().message);
        continue;
      }
      if (!sample) return sample.take_error();
      if (history) {
        KPIPE_TRY(history->append(*sample, s.keep));
        auto recent = history->recent(sampler.subject(), s.depth());
        if (!recent) return recent.take_error();
        reports.push_back(engine.report(*recent));
        KPIPE_TRY(sampler.add_latency(reports.back()));
        continue;
      }
      auto& mine = memory[subject];
      mine.push_back(std::move(*sample));
      if (mine.size() > s.depth()) mine.erase(mine.begin());
      reports.push_back(engine.report(mine));
      KPIPE_TRY(sampler.add_latency(reports.back()));
    }
    if (o.plot.given) {
      // Drawn once (no --watch), from every sample of the subjects just
      // sampled, this one included.
      std::vector<std::vector<LagSample>> histories;
      for (const auto& r : reports) {
        auto all = history->all(r.subject);
        if (!all) return all.take_error();
        histories.push_back(std::move(*all));
      }
      KPIPE_TRY(draw(s, o, engine, histories, io));
      return alert_status(reports, s.alerts);
    }
    write_reports(s, reports, trend, redraw, round > 0, io.out);
    KPIPE_TRY(io.out.flush());
    if (io.out.closed()) return {};
    KPIPE_TRY(alert_status(reports, s.alerts));
    if (s.watch == 0) return {};
    wait_for(s.watch, io);
    if (stopped(io)) return {};
  }
}

}  // namespace kpipe
