#include "kpipe/lag_format.h"

#include <algorithm>
#include <iterator>

#include "kpipe/json.h"
#include "kpipe/table.h"

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
  std::optional<double> lag_seconds;
};

std::vector<TopicTotals> topic_totals(const GroupReport& r) {
  std::vector<TopicTotals> out;
  for (const auto& p : r.partitions) {
    if (out.empty() || out.back().topic != p.sample.topic)
      out.push_back({p.sample.topic, 0, 0, std::nullopt});
    TopicTotals& t = out.back();
    ++t.partitions;
    if (auto lag = p.sample.lag()) t.lag += *lag;
    if (p.sample.lag_seconds && (!t.lag_seconds || *p.sample.lag_seconds > *t.lag_seconds))
      t.lag_seconds = p.sample.lag_seconds;
  }
  return out;
}

std::string seconds_cell(std::optional<double> s) {
  return s ? fmt::format("{:.1f}", *s) : "-";
}

}  // namespace

void write_ndjson(std::string& out, const GroupReport& r) {
  for (const auto& pr : r.partitions) {
    const PartitionSample& p = pr.sample;
    append_subject_json(out, r.subject);
    out.append(",\"topic\":");
    append_json_string(out, p.topic);
    out.append(",\"partition\":");
    append_int(out, p.partition);
    out.append(",\"committed\":");
    append_optional_int(out, p.committed);
    out.append(",\"end\":");
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
    if (pr.status) {
      append_json_string(out, lag_status_name(*pr.status));
    } else {
      out.append("null");
    }
    out.append("}\n");
  }
  for (const auto& t : topic_totals(r)) {
    append_subject_json(out, r.subject);
    out.append(",\"topic\":");
    append_json_string(out, t.topic);
    out.append(",\"partitions\":");
    append_int(out, t.partitions);
    out.append(",\"lag\":");
    append_int(out, t.lag);
    out.append(",\"lag_seconds\":");
    append_optional_double(out, t.lag_seconds);
    out.append("}\n");
  }
  append_subject_json(out, r.subject);
  out.append(",\"at\":\"");
  append_rfc3339(out, r.at);
  out.append("\",\"partitions\":");
  append_int(out, static_cast<int64_t>(r.partitions.size()));
  out.append(",\"lag\":");
  append_int(out, r.total_lag);
  out.append(",\"lag_seconds\":");
  append_optional_double(out, r.max_lag_seconds);
  out.append(",\"status\":");
  append_json_string(out, lag_status_name(r.status));
  if (!r.reason.empty()) {
    out.append(",\"reason\":");
    append_json_string(out, r.reason);
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

std::string render_table(const std::vector<GroupReport>& reports, bool trend) {
  bool state = !reports.empty() && reports.front().subject.kind == LagSubject::Kind::kState;
  std::vector<std::string> header = {
      state ? "STATE" : "GROUP", "TOPIC", "PARTITION",   "CURRENT-OFFSET",
      "LOG-END-OFFSET",          "LAG",   "LAG-SECONDS", "STATUS"};
  if (trend) header.push_back("TREND");
  TextTable table(header);
  std::vector<std::string> notes;
  for (const auto& r : reports) {
    auto totals = topic_totals(r);
    size_t t = 0;
    for (size_t i = 0; i < r.partitions.size(); ++i) {
      const PartitionReport& pr = r.partitions[i];
      const PartitionSample& p = pr.sample;
      auto lag = p.lag();
      std::vector<std::string> row = {r.subject.name,
                                      p.topic,
                                      std::to_string(p.partition),
                                      p.committed ? std::to_string(*p.committed) : "-",
                                      std::to_string(p.end),
                                      lag ? std::to_string(*lag) : "-",
                                      seconds_cell(p.lag_seconds),
                                      pr.status ? lag_status_name(*pr.status) : "-"};
      if (trend) row.push_back(sparkline(pr.recent_lags));
      table.add_row(std::move(row));
      bool topic_ends = i + 1 == r.partitions.size() || r.partitions[i + 1].sample.topic != p.topic;
      if (topic_ends && totals.size() > 1) {
        const TopicTotals& tt = totals[t];
        table.add_row({r.subject.name, tt.topic, "TOTAL", "", "", std::to_string(tt.lag),
                       seconds_cell(tt.lag_seconds), ""});
      }
      if (topic_ends) ++t;
    }
    table.add_row({r.subject.name, "TOTAL", "", "", "", std::to_string(r.total_lag),
                   seconds_cell(r.max_lag_seconds), lag_status_name(r.status)});
    if (r.stop_without_members)
      notes.push_back(fmt::format(
          "note: {}: STOP judged from the offsets alone: the broker cannot tell whether the "
          "group has active members",
          subject_text(r.subject)));
  }
  std::string out = table.render();
  for (const auto& n : notes) out += n + "\n";
  return out;
}

namespace {

void append_label_value(std::string& out, std::string_view v) {
  out.push_back('"');
  for (char c : v) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '"') {
      out.append("\\\"");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

void append_subject_labels(std::string& out, const LagSubject& s) {
  out.append(s.kind_name());
  out.push_back('=');
  append_label_value(out, s.name);
}

void append_help(std::string& out, std::string_view name, std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
}

}  // namespace

void write_prometheus(std::string& out, const std::vector<GroupReport>& reports) {
  struct PartitionMetric {
    const char* name;
    const char* help;
    std::optional<double> (*value)(const PartitionSample&);
  };
  static const PartitionMetric kPartitionMetrics[] = {
      {"kpipe_consumer_lag", "Records between the committed offset and the log end offset.",
       [](const PartitionSample& p) -> std::optional<double> {
         auto lag = p.lag();
         return lag ? std::optional<double>(static_cast<double>(*lag)) : std::nullopt;
       }},
      {"kpipe_consumer_lag_seconds",
       "Seconds since the record at the committed offset was produced; 0 when caught up.",
       [](const PartitionSample& p) { return p.lag_seconds; }},
      {"kpipe_consumer_committed_offset",
       "The committed offset: the next offset the consumer reads.",
       [](const PartitionSample& p) -> std::optional<double> {
         return p.committed ? std::optional<double>(static_cast<double>(*p.committed))
                            : std::nullopt;
       }},
      {"kpipe_log_end_offset", "The log end offset (high watermark) of the partition.",
       [](const PartitionSample& p) -> std::optional<double> {
         return static_cast<double>(p.end);
       }},
  };
  for (const auto& m : kPartitionMetrics) {
    append_help(out, m.name, m.help);
    for (const auto& r : reports) {
      for (const auto& pr : r.partitions) {
        auto v = m.value(pr.sample);
        // A partition without a committed offset has no lag: its series is
        // left out rather than written as NaN.
        if (!v) continue;
        out.append(m.name);
        out.push_back('{');
        append_subject_labels(out, r.subject);
        out.append(",topic=");
        append_label_value(out, pr.sample.topic);
        out.append(",partition=\"");
        append_int(out, pr.sample.partition);
        out.append("\"} ");
        append_double(out, *v);
        out.push_back('\n');
      }
    }
  }
  auto per_group = [&](const char* name, const char* help, auto value) {
    bool any = false;
    for (const auto& r : reports) {
      std::optional<double> v = value(r);
      if (!v) continue;
      if (!any) append_help(out, name, help);
      any = true;
      out.append(name);
      out.push_back('{');
      append_subject_labels(out, r.subject);
      out.append("} ");
      append_double(out, *v);
      out.push_back('\n');
    }
  };
  per_group("kpipe_consumer_group_lag", "Records behind, summed over the partitions.",
            [](const GroupReport& r) -> std::optional<double> {
              return static_cast<double>(r.total_lag);
            });
  per_group("kpipe_consumer_group_lag_seconds", "The largest lag in seconds of the partitions.",
            [](const GroupReport& r) { return r.max_lag_seconds; });
  per_group("kpipe_consumer_group_members",
            "Active members of the group (absent: the broker cannot tell).",
            [](const GroupReport& r) -> std::optional<double> {
              if (!r.members) return std::nullopt;
              return static_cast<double>(*r.members);
            });
  per_group("kpipe_lag_sample_timestamp_seconds",
            "When klag took the sample, in seconds since the epoch.",
            [](const GroupReport& r) -> std::optional<double> {
              return static_cast<double>(r.at) / 1000.0;
            });
  if (reports.empty()) return;
  append_help(out, "kpipe_consumer_group_status",
              "The status by Burrow's rules: 1 for the current one, else 0.");
  for (const auto& r : reports) {
    for (LagStatus s : kLagStatuses) {
      out.append("kpipe_consumer_group_status{");
      append_subject_labels(out, r.subject);
      out.append(",status=\"");
      out.append(lag_status_name(s));
      out.append(r.status == s ? "\"} 1\n" : "\"} 0\n");
    }
  }
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
