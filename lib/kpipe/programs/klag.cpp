#include "kpipe/programs/klag.h"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "kpipe/choices.h"
#include "kpipe/kafka/client.h"
#include "kpipe/lag.h"
#include "kpipe/lag_format.h"
#include "kpipe/store/lag_history.h"
#include "kpipe/store/postgres.h"
#include "kpipe/store/state_store.h"

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
  AlertSettings alerts;
  std::vector<LagSubject> subjects;
  size_t depth() const { return std::max(rules.window + 1, kTrendSamples); }
};

Expected<Settings> resolve(const LagOptions& o, const Io& io) {
  Settings s;
  if (o.groups.empty() && o.state.empty()) return usage_error("give -g GROUP or --state FILE");
  if (!o.groups.empty() && !o.state.empty())
    return usage_error("give -g GROUP or --state FILE, not both");
  std::set<std::string> seen;
  for (const auto& g : o.groups) {
    if (g.empty()) return usage_error("-g: the group name is empty");
    if (seen.insert(g).second) s.subjects.push_back({LagSubject::Kind::kGroup, g});
  }
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

// Where one subject's offsets come from, and the broker behind them.
class Sampler {
 public:
  Sampler(const LagOptions& options, LagSubject subject, LagEngine& engine, LagHistory* history,
          Io& io)
      : options_(options),
        subject_(std::move(subject)),
        engine_(engine),
        history_(history),
        io_(io) {}

  Expected<LagSample> sample(const KafkaConfig& config) {
    if (!reader_) {
      auto reader =
          GroupReader::create(config, is_group() ? subject_.name : std::string(), io_.reporter);
      if (!reader) return reader.take_error();
      reader_ = std::move(*reader);
    }
    std::vector<PartitionReading> readings;
    std::optional<int64_t> members;
    std::string group_state;
    if (is_group()) {
      auto found = read_group(readings, members, group_state);
      if (!found.ok()) return found.take_error();
    } else {
      KPIPE_TRY(read_state(readings));
    }
    std::vector<TopicPartition> parts;
    for (const auto& r : readings) parts.push_back({r.topic, r.partition});
    auto marks = reader_->watermarks(parts);
    if (!marks) return marks.take_error();
    std::vector<PartitionOffset> lagging;
    std::vector<size_t> lagging_index;
    for (size_t i = 0; i < readings.size(); ++i) {
      auto& r = readings[i];
      r.end = (*marks)[i].high;
      if (!r.committed || *r.committed >= r.end) continue;
      // Below the log start, the record is gone: the oldest one left is
      // the best answer there is.
      lagging.push_back({r.topic, r.partition, std::max(*r.committed, (*marks)[i].low)});
      lagging_index.push_back(i);
    }
    warn_uncommitted(readings);
    std::map<TopicPartition, std::vector<EndOffsetSeen>> timelines;
    if (options_.no_fetch) {
      for (const auto& p : lagging) {
        auto seen = history_->end_offsets_around({p.topic, p.partition}, p.offset);
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
        // offset and the end is transaction markers (and aborted records),
        // not lag (klag(1), Lag in seconds). Its end is then the end of its records.
        if (ends[k] && *ends[k] >= r.end && lagging[k].offset == *r.committed) r.end = *r.committed;
      }
    }
    return engine_.sample(subject_, members, std::move(group_state), readings, timelines);
  }

  const LagSubject& subject() const { return subject_; }

 private:
  bool is_group() const { return subject_.kind == LagSubject::Kind::kGroup; }

  Status read_group(std::vector<PartitionReading>& readings, std::optional<int64_t>& members,
                    std::string& group_state) {
    const std::string& group = subject_.name;
    std::vector<TopicPartition> parts;
    if (options_.topics.empty()) {
      auto all = reader_->topic_partitions();
      if (!all) return all.take_error();
      for (const auto& [topic, ids] : *all)
        for (int32_t p : ids) parts.push_back({topic, p});
    } else {
      for (const auto& topic : options_.topics) {
        auto ids = reader_->partitions(topic);
        if (!ids) return ids.take_error();
        for (int32_t p : *ids) parts.push_back({topic, p});
      }
    }
    auto committed = reader_->committed(parts);
    if (!committed) return committed.take_error();
    auto described = reader_->describe();
    if (!described) return described.take_error();
    bool any = std::any_of(committed->begin(), committed->end(),
                           [](const auto& c) { return c.has_value(); });
    if (described->described) {
      members = described->members;
      group_state = described->state;
      if (!described->exists && !any) return failure("consumer group '{}' does not exist", group);
    }
    if (!any) {
      // A group the broker knows, asked about given topics: its partitions
      // are shown as "-". Otherwise there is nothing to show.
      if (described->described && options_.topics.empty())
        return failure("consumer group '{}' has committed no offsets yet", group);
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
    // Without -t: the topics the group has committed on.
    std::set<std::string> used;
    if (options_.topics.empty())
      for (size_t i = 0; i < parts.size(); ++i)
        if ((*committed)[i]) used.insert(parts[i].topic);
    for (size_t i = 0; i < parts.size(); ++i) {
      if (options_.topics.empty() && !used.count(parts[i].topic)) continue;
      PartitionReading r;
      r.topic = parts[i].topic;
      r.partition = parts[i].partition;
      r.committed = (*committed)[i];
      readings.push_back(std::move(r));
    }
    return {};
  }

  Status read_state(std::vector<PartitionReading>& readings) {
    if (!store_) {
      auto store = StateStore::open(options_.state);
      if (!store) return store.take_error();
      store_ = std::move(*store);
    }
    auto offsets = store_->offsets();
    if (!offsets) return offsets.take_error();
    std::set<std::string> wanted(options_.topics.begin(), options_.topics.end());
    for (const auto& o : *offsets) {
      if (!wanted.empty() && !wanted.count(o.topic)) continue;
      PartitionReading r;
      r.topic = o.topic;
      r.partition = o.partition;
      r.committed = o.offset;
      r.committed_at = o.committed_at;
      readings.push_back(std::move(r));
    }
    if (readings.empty())
      return failure(
          "state file '{}' holds no offsets{}: no checkpoint of the pipeline is complete yet",
          subject_.name, wanted.empty() ? "" : fmt::format(" on {}", topic_list()));
    return {};
  }

  // Partitions without a committed offset are shown as "-" (null in
  // ndjson); say why once, per topic.
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
      io_.reporter.warning(
          fmt::format("{} has no committed offset on {} partition{} of topic '{}' ({}): shown as -",
                      subject_text(subject_), ids.size(), ids.size() == 1 ? "" : "s", topic, list));
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
  LagEngine& engine_;
  LagHistory* history_;
  Io& io_;
  std::unique_ptr<GroupReader> reader_;
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
      buf += render_table(reports, trend);
      break;
    case Format::kNdjson:
      for (const auto& r : reports) write_ndjson(buf, r);
      break;
    case Format::kPrometheus:
      write_prometheus(buf, reports);
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

Status run_status(const Settings& s, const LagOptions& o, LagEngine& engine, Io& io) {
  auto history = LagHistory::open(o.history, true);
  if (!history) return history.take_error();
  std::vector<GroupReport> reports;
  for (const auto& subject : s.subjects) {
    auto samples = (*history)->recent(subject, s.depth());
    if (!samples) return samples.take_error();
    if (samples->empty())
      return failure("history '{}' holds no samples of {}: run klag {} {} --history {} first",
                     o.history, subject_text(subject),
                     subject.kind == LagSubject::Kind::kGroup ? "-g" : "--state", subject.name,
                     o.history);
    reports.push_back(engine.report(*samples));
  }
  write_reports(s, reports, true, false, false, io.out);
  KPIPE_TRY(io.out.flush());
  return alert_status(reports, s.alerts);
}

}  // namespace

Status run_lag(const LagOptions& o, Io& io) {
  auto settings = resolve(o, io);
  if (!settings) return settings.take_error();
  const Settings& s = *settings;
  LagEngine engine(io.clock, s.rules);
  if (o.status_only) return run_status(s, o, engine, io);

  if (!o.state.empty() && !is_postgres_target(o.state)) {
    struct stat st;
    if (::stat(o.state.c_str(), &st) != 0)
      return failure("state file '{}' does not exist", o.state);
  }
  auto config = resolve_kafka_config(o.kafka, io.env_brokers);
  if (!config) return config.take_error();
  std::unique_ptr<LagHistory> history;
  if (!o.history.empty()) {
    auto opened = LagHistory::open(o.history);
    if (!opened) return opened.take_error();
    history = std::move(*opened);
  }
  std::vector<Sampler> samplers;
  for (const auto& subject : s.subjects)
    samplers.emplace_back(o, subject, engine, history.get(), io);
  // Without a history, --watch keeps its samples in memory.
  std::map<LagSubject, std::vector<LagSample>> memory;
  bool trend = s.watch > 0 || history != nullptr;
  bool redraw = s.watch > 0 && io.interactive && s.format == Format::kTable;
  for (size_t round = 0;; ++round) {
    std::vector<GroupReport> reports;
    for (auto& sampler : samplers) {
      auto sample = sampler.sample(*config);
      if (!sample) return sample.take_error();
      if (history) {
        KPIPE_TRY(history->append(*sample, s.keep));
        auto recent = history->recent(sampler.subject(), s.depth());
        if (!recent) return recent.take_error();
        reports.push_back(engine.report(*recent));
        continue;
      }
      auto& mine = memory[sampler.subject()];
      mine.push_back(std::move(*sample));
      if (mine.size() > s.depth()) mine.erase(mine.begin());
      reports.push_back(engine.report(mine));
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
