#include "kpipe/lag_format.h"
#include "kpipe/stats.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "kpipe/choices.h"
#include "kpipe/json.h"
#include "kpipe/text_table.h"

namespace kpipe {

namespace {

void append_subject_json(std::string& out, const LagSubject& s) {
  out.append("{\"");
  out.append(s.kind_name());
  out.append("\":");
  append_json_string(out, s.name);
}

void append_optional_double(std::string& out, std::optional<double> v) {
  if (v) {
    append_double(out, *v);
  } else {
    out.append("null");
  }
}

struct TopicTotals {
  std::string topic;
  int64_t partitions = 0;
  int64_t lag = 0;
  std::optional<double> lag_seconds = std::nullopt;
  std::optional<LagStatus> status = std::nullopt;  // the worst judged partition's
  // Its partitions counted without a committed offset, and how.
  int64_t assumed_partitions = 0;
  std::set<Uncommitted> assumed = {};
  std::vector<int64_t> recent_lags = {};  // the partitions', summed, aligned on the latest
  bool by_time = true;                    // every partition a Kinesis shard: no lag in records
};

std::vector<TopicTotals> topic_totals(const GroupReport& r) {
  std::vector<TopicTotals> out;
  for (const auto& p : r.partitions) {
    if (out.empty() || out.back().topic != p.sample.topic) out.push_back({p.sample.topic});
    TopicTotals& t = out.back();
    ++t.partitions;
    t.by_time = t.by_time && p.sample.by_time;
    if (auto lag = p.sample.lag()) t.lag += *lag;
    if (p.sample.lag_seconds && (!t.lag_seconds || *p.sample.lag_seconds > *t.lag_seconds))
      t.lag_seconds = p.sample.lag_seconds;
    if (p.status && (!t.status || *p.status > *t.status)) t.status = p.status;
    if (p.sample.is_assumed()) {
      ++t.assumed_partitions;
      t.assumed.insert(p.sample.assumed);
    }
    // A partition with fewer samples (newer, or once ignored) adds to the
    // latest ones only.
    const auto& mine = p.recent_lags;
    if (mine.size() > t.recent_lags.size())
      t.recent_lags.insert(t.recent_lags.begin(), mine.size() - t.recent_lags.size(), 0);
    size_t skip = t.recent_lags.size() - mine.size();
    for (size_t i = 0; i < mine.size(); ++i) t.recent_lags[skip + i] += mine[i];
  }
  return out;
}

std::string seconds_cell(std::optional<double> s) {
  return s ? fmt::format("{:.1f}", *s) : "-";
}

void append_optional_status(std::string& out, std::optional<LagStatus> s) {
  if (s) {
    append_json_string(out, lag_status_name(*s));
  } else {
    out.append("null");
  }
}

// The note under a table with assumed offsets; `some`: of some of a
// topic's partitions (--granularity topic).
std::string assumed_note(Uncommitted u, bool some) {
  return fmt::format(
      "* nothing committed{}: counted from the log {} offset, where a consumer with "
      "auto.offset.reset={} begins (--uncommitted {})\n",
      some ? " on some partitions" : "", u == Uncommitted::kLatest ? "end" : "start",
      uncommitted_name(u), uncommitted_name(u));
}

}  // namespace

Expected<Granularity> parse_granularity(std::string_view text) {
  auto found = parse_choice("--granularity", text, {"partition", "topic"});
  if (!found) return found.take_error();
  return static_cast<Granularity>(*found);
}

Expected<MetricNames> parse_metric_names(std::string_view text) {
  auto found = parse_choice("--metric-names", text, {"kpipe", "kafka_exporter"});
  if (!found) return found.take_error();
  return static_cast<MetricNames>(*found);
}

void write_ndjson(std::string& out, const GroupReport& r, Granularity granularity) {
  for (const auto& pr : r.partitions) {
    if (granularity == Granularity::kTopic) break;
    const PartitionSample& p = pr.sample;
    append_subject_json(out, r.subject);
    out.append(",\"topic\":");
    append_json_string(out, p.topic);
    out.append(",\"partition\":");
    append_int(out, p.partition);
    out.append(",\"committed\":");
    if (p.committed)
      p.committed->append_json(out);
    else
      out.append("null");
    if (p.is_assumed()) {
      out.append(",\"assumed\":\"");
      out.append(uncommitted_name(p.assumed));
      out.push_back('"');
    }
    // A Kinesis shard's end is not known (PartitionSample).
    out.append(",\"end\":");
    if (p.by_time)
      out.append("null");
    else
      append_int(out, p.end);
    out.append(",\"lag\":");
    append_optional_int(out, p.lag());
    out.append(",\"lag_seconds\":");
    append_optional_double(out, p.lag_seconds);
    if (p.committed_at) {
      out.append(",\"committed_at\":\"");
      append_rfc3339(out, *p.committed_at);
      out.push_back('"');
    }
    out.append(",\"status\":");
    append_optional_status(out, pr.status);
    out.append("}\n");
  }
  for (const auto& t : topic_totals(r)) {
    append_subject_json(out, r.subject);
    out.append(",\"topic\":");
    append_json_string(out, t.topic);
    out.append(",\"partitions\":");
    append_int(out, t.partitions);
    // Without partition lines, the topic's line says what they would.
    if (granularity == Granularity::kTopic) {
      out.append(",\"uncommitted\":");
      append_int(out, t.assumed_partitions);
    }
    out.append(",\"lag\":");
    if (t.by_time)
      out.append("null");
    else
      append_int(out, t.lag);
    out.append(",\"lag_seconds\":");
    append_optional_double(out, t.lag_seconds);
    if (granularity == Granularity::kTopic) {
      out.append(",\"status\":");
      append_optional_status(out, t.status);
    }
    out.append("}\n");
  }
  append_subject_json(out, r.subject);
  out.append(",\"at\":\"");
  append_rfc3339(out, r.at);
  out.append("\",\"partitions\":");
  append_int(out, static_cast<int64_t>(r.partitions.size()));
  out.append(",\"lag\":");
  if (r.by_time)
    out.append("null");
  else
    append_int(out, r.total_lag);
  out.append(",\"lag_seconds\":");
  append_optional_double(out, r.max_lag_seconds);
  out.append(",\"status\":");
  append_json_string(out, lag_status_name(r.status));
  if (!r.reason.empty()) {
    out.append(",\"reason\":");
    append_json_string(out, r.reason);
  }
  if (r.latency) {
    out.append(",\"latency_ms\":");
    append_latency_json(out, *r.latency, r.latency_checkpoint);
  }
  if (r.subject.kind == LagSubject::Kind::kGroup) {
    // null: the broker cannot tell (kbroker), which the STOP rule then
    // cannot use.
    out.append(",\"members\":");
    append_optional_int(out, r.members);
    if (!r.group_state.empty()) {
      out.append(",\"group_state\":");
      append_json_string(out, r.group_state);
    }
  }
  out.append("}\n");
}

namespace {

// Marks an assumed figure ("7*") and keeps its column aligned.
// TextTable right-aligns a column of numbers only, and "7*" is none: the
// cells are aligned here, the marks hanging past the digits.
void align_marked(std::vector<std::vector<std::string>>& rows, size_t column,
                  const std::string& header) {
  size_t w = header.size();
  for (auto& row : rows) {
    if (!row[column].ends_with('*')) row[column] += ' ';
    w = std::max(w, row[column].size());
  }
  for (auto& row : rows) row[column].insert(0, w - row[column].size(), ' ');
}

}  // namespace

std::string render_table(const std::vector<GroupReport>& reports, bool trend,
                         Granularity granularity) {
  bool state = !reports.empty() && reports.front().subject.kind == LagSubject::Kind::kState;
  bool by_topic = granularity == Granularity::kTopic;
  std::vector<std::string> header = {state ? "STATE" : "GROUP", "TOPIC"};
  if (by_topic) {
    header.insert(header.end(), {"PARTITIONS", "LAG", "LAG-SECONDS", "STATUS"});
  } else {
    header.insert(header.end(), {"PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                 "LAG-SECONDS", "STATUS"});
  }
  if (trend) header.push_back("TREND");
  // Where a mark for an assumed offset goes: on the offset, or on the
  // count of the topic's partitions.
  const size_t marked = by_topic ? 2 : 3;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  std::set<Uncommitted> assumed;
  for (const auto& r : reports) {
    auto totals = topic_totals(r);
    if (by_topic) {
      for (const auto& t : totals) {
        std::string count = std::to_string(t.partitions);
        if (!t.assumed.empty()) count += '*';
        assumed.insert(t.assumed.begin(), t.assumed.end());
        std::vector<std::string> row = {r.subject.name,
                                        t.topic,
                                        count,
                                        t.by_time ? "-" : std::to_string(t.lag),
                                        seconds_cell(t.lag_seconds),
                                        t.status ? lag_status_name(*t.status) : "-"};
        if (trend) row.push_back(sparkline(t.recent_lags));
        rows.push_back(std::move(row));
      }
      rows.push_back({r.subject.name, "TOTAL", std::to_string(r.partitions.size()),
                      r.by_time ? "-" : std::to_string(r.total_lag),
                      seconds_cell(r.max_lag_seconds), lag_status_name(r.status)});
    } else {
      size_t t = 0;
      for (size_t i = 0; i < r.partitions.size(); ++i) {
        const PartitionReport& pr = r.partitions[i];
        const PartitionSample& p = pr.sample;
        auto lag = p.lag();
        // An assumed offset is shown where the committed one would be,
        // marked, and explained under the table.
        auto from = p.position();
        std::string current = from ? position_text(*from, p.by_time) : "-";
        if (p.is_assumed()) {
          current += '*';
          assumed.insert(p.assumed);
        }
        std::vector<std::string> row = {r.subject.name,
                                        p.topic,
                                        std::to_string(p.partition),
                                        current,
                                        p.by_time ? "-" : std::to_string(p.end),
                                        lag ? std::to_string(*lag) : "-",
                                        seconds_cell(p.lag_seconds),
                                        pr.status ? lag_status_name(*pr.status) : "-"};
        if (trend) row.push_back(sparkline(pr.recent_lags));
        rows.push_back(std::move(row));
        bool topic_ends =
            i + 1 == r.partitions.size() || r.partitions[i + 1].sample.topic != p.topic;
        if (topic_ends && totals.size() > 1) {
          const TopicTotals& tt = totals[t];
          rows.push_back({r.subject.name, tt.topic, "TOTAL", "", "",
                          tt.by_time ? "-" : std::to_string(tt.lag), seconds_cell(tt.lag_seconds),
                          ""});
        }
        if (topic_ends) ++t;
      }
      rows.push_back({r.subject.name, "TOTAL", "", "", "",
                      r.by_time ? "-" : std::to_string(r.total_lag),
                      seconds_cell(r.max_lag_seconds), lag_status_name(r.status)});
    }
    if (r.stop_without_members)
      notes.push_back(fmt::format(
          "note: {}: STOP judged from the offsets alone: the broker cannot tell whether the "
          "group has active members",
          subject_text(r.subject)));
    if (r.latency)
      notes.push_back(fmt::format(
          "end to end: {}: checkpoint {}: p99 {} (p50 {}, max {}) from the {} of its {} records "
          "to its completion",
          r.subject.name, r.latency_checkpoint,
          format_duration(std::max<Millis>(r.latency->p99, 0)),
          format_duration(std::max<Millis>(r.latency->p50, 0)),
          format_duration(std::max<Millis>(r.latency->max, 0)),
          r.by_time ? "arrival times" : "Kafka timestamps", r.latency->records));
  }
  if (!assumed.empty()) align_marked(rows, marked, header[marked]);
  TextTable table(header);
  for (auto& row : rows) table.add_row(std::move(row));
  std::string out = table.render();
  for (Uncommitted u : assumed) out += assumed_note(u, by_topic);
  for (const auto& n : notes) out += n + "\n";
  return out;
}

namespace {

void append_label_value(std::string& out, std::string_view v) {
  out.push_back('"');
  append_prometheus_label(out, v);
  out.push_back('"');
}

void append_help(std::string& out, std::string_view name, std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
}

using Labels = std::vector<std::pair<std::string_view, std::string>>;

// A metric's samples, written after its HELP and TYPE.
struct Family {
  std::string name;
  std::string help;
  bool always = false;  // HELP and TYPE even without a sample
  std::string samples = {};

  void add(const Labels& labels, double v) {
    samples += name;
    samples.push_back('{');
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) samples.push_back(',');
      samples.append(labels[i].first);
      samples.push_back('=');
      append_label_value(samples, labels[i].second);
    }
    samples.append("} ");
    append_double(samples, v);
    samples.push_back('\n');
  }
  void write(std::string& out) const {
    if (samples.empty() && !always) return;
    append_help(out, name, help);
    out += samples;
  }
};

// What the partition-level metrics are written for: a partition, or with
// Granularity::kTopic a group's topic, its partitions summed. None where
// there is nothing to say: a partition without an offset (nothing
// committed, --uncommitted ignore) has no lag, and its series is left out
// rather than written as NaN.
struct Row {
  const GroupReport* report;
  std::string topic;
  std::optional<int32_t> partition;
  std::optional<double> lag, lag_seconds, committed, end, start;
};

std::optional<double> as_double(std::optional<int64_t> v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

// a + b where either is known.
std::optional<double> plus(std::optional<double> a, std::optional<double> b) {
  if (!a) return b;
  if (!b) return a;
  return *a + *b;
}

std::vector<Row> rows_of(const std::vector<GroupReport>& reports, Granularity granularity) {
  std::vector<Row> rows;
  for (const auto& r : reports) {
    for (const auto& pr : r.partitions) {
      const PartitionSample& p = pr.sample;
      // A Kinesis shard has its lag in seconds alone: a sequence number
      // is no float, and it has no end to show (PartitionSample).
      std::optional<int64_t> committed;
      if (p.committed && !p.by_time) committed = p.committed->offset();
      Row row{&r,
              p.topic,
              p.partition,
              as_double(p.lag()),
              p.lag_seconds,
              as_double(committed),
              p.by_time ? std::nullopt : std::optional<double>(static_cast<double>(p.end)),
              p.by_time ? std::nullopt : as_double(p.start)};
      bool same_topic = !rows.empty() && rows.back().report == &r && rows.back().topic == p.topic;
      if (granularity == Granularity::kPartition || !same_topic) {
        if (granularity == Granularity::kTopic) row.partition.reset();
        rows.push_back(std::move(row));
        continue;
      }
      Row& t = rows.back();
      t.lag = plus(t.lag, row.lag);
      if (row.lag_seconds && (!t.lag_seconds || *row.lag_seconds > *t.lag_seconds))
        t.lag_seconds = row.lag_seconds;
      t.committed = plus(t.committed, row.committed);
      t.end = plus(t.end, row.end);
      // A sum of log starts is one only when every partition's is known.
      t.start = t.start && row.start ? plus(t.start, row.start) : std::nullopt;
    }
  }
  return rows;
}

}  // namespace

void write_prometheus(std::string& out, const std::vector<GroupReport>& reports,
                      const PrometheusOptions& options) {
  bool exporter = options.names == MetricNames::kKafkaExporter;
  bool by_topic = options.granularity == Granularity::kTopic;
  auto subject = [&](const GroupReport& r) -> Labels {
    return {{exporter ? "consumergroup" : r.subject.kind_name(), r.subject.name}};
  };
  auto labels = [&](const Row& row, bool partition) {
    Labels l = subject(*row.report);
    l.emplace_back("topic", row.topic);
    if (partition && row.partition) l.emplace_back("partition", std::to_string(*row.partition));
    return l;
  };
  std::vector<Row> rows = rows_of(reports, options.granularity);
  std::vector<Family> families;

  if (!exporter) {
    const char* summed = by_topic ? " Summed over the topic's partitions." : "";
    Family lag{"kpipe_consumer_lag",
               fmt::format("Records between the committed offset (without one, the offset "
                           "--uncommitted counts from) and the log end offset.{}",
                           summed),
               true};
    Family seconds{"kpipe_consumer_lag_seconds",
                   fmt::format("Seconds since the record at the committed offset (without one, the "
                               "offset --uncommitted counts from) was produced; 0 when caught "
                               "up.{}",
                               by_topic ? " The largest of the topic's partitions." : ""),
                   true};
    Family committed{
        "kpipe_consumer_committed_offset",
        fmt::format("The committed offset: the next offset the consumer reads.{}",
                    by_topic ? " Summed over the topic's partitions that have one." : ""),
        true};
    Family end{"kpipe_log_end_offset",
               fmt::format("The log end offset (high watermark) of the partition.{}", summed),
               true};
    for (const auto& row : rows) {
      Labels l = labels(row, true);
      if (row.lag) lag.add(l, *row.lag);
      if (row.lag_seconds) seconds.add(l, *row.lag_seconds);
      if (row.committed) committed.add(l, *row.committed);
      if (row.end) end.add(l, *row.end);
    }
    families.insert(families.end(), {lag, seconds, committed, end});
  } else {
    // kafka_exporter's metrics: per partition, and summed per topic. Its
    // topic metrics have no group label: each partition once, whatever
    // the groups reading it.
    Family offset{"kafka_consumergroup_current_offset",
                  "The offset a consumer group has committed at a topic partition."};
    Family offset_sum{"kafka_consumergroup_current_offset_sum",
                      "The offsets a consumer group has committed at a topic, summed over its "
                      "partitions that have one."};
    Family lag{"kafka_consumergroup_lag",
               "Records a consumer group is behind at a topic partition (without a committed "
               "offset, counted as klag --uncommitted says)."};
    Family lag_sum{"kafka_consumergroup_lag_sum",
                   "Records a consumer group is behind at a topic, summed over its partitions."};
    // kafka_exporter has no lag in seconds (its issue 464 asks for one):
    // klag's own name, with kafka_exporter's labels.
    Family seconds{"kpipe_consumer_lag_seconds",
                   "Seconds since the record at the committed offset (without one, the offset "
                   "--uncommitted counts from) was produced; 0 when caught up."};
    Family end{"kafka_topic_partition_current_offset",
               "The log end offset (high watermark) of a topic partition."};
    Family start{"kafka_topic_partition_oldest_offset",
                 "The log start offset of a topic partition."};
    std::set<std::pair<std::string, int32_t>> seen;
    std::vector<Row> topics = by_topic ? rows : rows_of(reports, Granularity::kTopic);
    for (const auto& row : topics) {
      Labels l = labels(row, false);
      if (row.committed) offset_sum.add(l, *row.committed);
      if (row.lag) lag_sum.add(l, *row.lag);
    }
    if (!by_topic) {
      for (const auto& row : rows) {
        Labels l = labels(row, true);
        if (row.committed) offset.add(l, *row.committed);
        if (row.lag) lag.add(l, *row.lag);
        if (row.lag_seconds) seconds.add(l, *row.lag_seconds);
        if (!seen.insert({row.topic, *row.partition}).second) continue;
        Labels part = {{"topic", row.topic}, {"partition", std::to_string(*row.partition)}};
        if (row.end) end.add(part, *row.end);
        if (row.start) start.add(part, *row.start);
      }
    }
    families.insert(families.end(), {offset, offset_sum, lag, lag_sum, seconds, end, start});
  }

  auto per_group = [&](std::string name, std::string help, auto value) {
    Family f{std::move(name), std::move(help)};
    for (const auto& r : reports)
      if (std::optional<double> v = value(r)) f.add(subject(r), *v);
    families.push_back(std::move(f));
  };
  per_group("kpipe_consumer_group_lag", "Records behind, summed over the partitions.",
            [](const GroupReport& r) -> std::optional<double> {
              if (r.by_time) return std::nullopt;
              return static_cast<double>(r.total_lag);
            });
  per_group("kpipe_consumer_group_lag_seconds", "The largest lag in seconds of the partitions.",
            [](const GroupReport& r) { return r.max_lag_seconds; });
  per_group(exporter ? "kafka_consumergroup_members" : "kpipe_consumer_group_members",
            "Active members of the group (absent: the broker cannot tell).",
            [](const GroupReport& r) -> std::optional<double> {
              if (!r.members) return std::nullopt;
              return static_cast<double>(*r.members);
            });
  per_group("kpipe_consumer_group_uncommitted_partitions",
            "Partitions counted by --uncommitted: the group consumes their topic but has "
            "committed nothing on them.",
            [](const GroupReport& r) -> std::optional<double> {
              if (r.subject.kind != LagSubject::Kind::kGroup) return std::nullopt;
              return static_cast<double>(r.assumed_partitions);
            });
  per_group("kpipe_lag_sample_timestamp_seconds",
            "When klag took the sample, in seconds since the epoch.",
            [](const GroupReport& r) -> std::optional<double> {
              return static_cast<double>(r.at) / 1000.0;
            });
  Family status{"kpipe_consumer_group_status",
                "The status by Burrow's rules: 1 for the current one, else 0."};
  for (const auto& r : reports) {
    for (LagStatus st : kLagStatuses) {
      Labels l = subject(r);
      l.emplace_back("status", lag_status_name(st));
      status.add(l, r.status == st ? 1 : 0);
    }
  }
  families.push_back(std::move(status));
  for (const auto& f : families) f.write(out);
}

std::string sparkline(const std::vector<int64_t>& values) {
  static const char* const kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  int64_t top = 0;
  for (int64_t v : values) top = std::max(top, v);
  std::string out;
  for (int64_t v : values) {
    long i = top <= 0 ? 0
                      : std::lround(7.0 * static_cast<double>(std::max<int64_t>(v, 0)) /
                                    static_cast<double>(top));
    out += kBars[std::clamp<long>(i, 0, 7)];
  }
  return out;
}

}  // namespace kpipe
