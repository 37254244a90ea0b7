#include "kpipe/lag.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <tuple>

#include "kpipe/choices.h"
#include "kpipe/json.h"
#include "kpipe/table.h"

namespace kpipe {

namespace {

constexpr LagStatus kAllStatuses[] = {LagStatus::kOk, LagStatus::kWarn, LagStatus::kStall, LagStatus::kStop,
                                      LagStatus::kRewind};

int64_t lag_of(const PartitionPoint& p) { return std::max<int64_t>(0, p.end - *p.committed); }

std::string where(const PartitionSample& p) { return fmt::format("{} [{}]", p.topic, p.partition); }

std::string subject_text(const LagSubject& s) { return fmt::format("{} '{}'", s.kind_name(), s.name); }

double millis_to_seconds(Millis ms) { return static_cast<double>(std::max<Millis>(0, ms)) / 1000.0; }

}  // namespace

const char* lag_status_name(LagStatus s) {
  switch (s) {
    case LagStatus::kOk: return "OK";
    case LagStatus::kWarn: return "WARN";
    case LagStatus::kStall: return "STALL";
    case LagStatus::kStop: return "STOP";
    case LagStatus::kRewind: return "REWIND";
  }
  return "OK";
}

Expected<LagStatus> parse_fail_on(std::string_view text) {
  std::string upper(text);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::vector<std::string> choices = {"WARN", "STALL", "STOP", "REWIND"};
  auto found = std::find(choices.begin(), choices.end(), upper);
  if (found == choices.end()) return unknown_choice("status", text, choices);
  return kAllStatuses[1 + (found - choices.begin())];
}

std::optional<int64_t> PartitionSample::lag() const {
  if (!committed) return std::nullopt;
  return std::max<int64_t>(0, end - *committed);
}

// --- lag in seconds --------------------------------------------------------

std::optional<Millis> estimate_produce_time(std::vector<EndOffsetSeen> points, int64_t offset) {
  // One point per offset, seen from its first to its last sight.
  std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  std::vector<EndOffsetSeen> merged;
  for (const auto& p : points) {
    if (!merged.empty() && merged.back().offset == p.offset) {
      merged.back().first_seen = std::min(merged.back().first_seen, p.first_seen);
      merged.back().last_seen = std::max(merged.back().last_seen, p.last_seen);
      continue;
    }
    merged.push_back(p);
  }
  auto above = std::upper_bound(merged.begin(), merged.end(), offset,
                                [](int64_t o, const EndOffsetSeen& p) { return o < p.offset; });
  if (above == merged.end()) return std::nullopt;  // not produced when last seen
  double o0, t0, o1, t1;
  if (above == merged.begin()) {
    // Older than every sight: extrapolate the rate of the first two.
    if (merged.size() < 2) return std::nullopt;
    o0 = static_cast<double>(merged[0].offset);
    t0 = static_cast<double>(merged[0].first_seen);
    o1 = static_cast<double>(merged[1].offset);
    t1 = static_cast<double>(merged[1].first_seen);
  } else {
    // Record `offset` did not exist while the end stood at or before it
    // (until its last sight), and did once the end had passed it.
    const auto& lo = *(above - 1);
    o0 = static_cast<double>(lo.offset);
    t0 = static_cast<double>(lo.last_seen);
    o1 = static_cast<double>(above->offset);
    t1 = static_cast<double>(above->first_seen);
  }
  double t = t0 + (static_cast<double>(offset) - o0) * (t1 - t0) / (o1 - o0);
  return static_cast<Millis>(std::llround(t));
}

LagSample LagEngine::sample(const LagSubject& subject, std::optional<int64_t> members, std::string group_state,
                            const std::vector<PartitionReading>& readings,
                            const std::map<TopicPartition, std::vector<EndOffsetSeen>>& timelines) {
  LagSample s;
  s.subject = subject;
  s.at = clock_.now();
  s.members = members;
  s.group_state = std::move(group_state);
  s.partitions.reserve(readings.size());
  TopicPartition key;
  for (const auto& r : readings) {
    PartitionSample p{r.topic, r.partition, r.committed, r.end, r.committed_at, std::nullopt};
    if (r.committed) {
      if (*r.committed >= r.end) {
        p.lag_seconds = 0.0;
      } else if (r.record_timestamp) {
        p.lag_seconds = millis_to_seconds(s.at - *r.record_timestamp);
      } else {
        key.topic = r.topic;
        key.partition = r.partition;
        auto found = timelines.find(key);
        std::vector<EndOffsetSeen> points;
        if (found != timelines.end()) points = found->second;
        points.push_back({r.end, s.at, s.at});
        auto produced = estimate_produce_time(std::move(points), *r.committed);
        if (produced) p.lag_seconds = millis_to_seconds(s.at - *produced);
      }
    }
    s.partitions.push_back(std::move(p));
  }
  std::sort(s.partitions.begin(), s.partitions.end(), [](const auto& a, const auto& b) {
    return std::tie(a.topic, a.partition) < std::tie(b.topic, b.partition);
  });
  return s;
}

// --- Burrow's rules --------------------------------------------------------

std::optional<PartitionVerdict> judge_partition(const std::vector<PartitionPoint>& all, std::optional<int64_t> members,
                                                const RuleSettings& rules) {
  std::vector<const PartitionPoint*> v;
  for (const auto& p : all)
    if (p.committed) v.push_back(&p);
  if (v.empty()) return std::nullopt;
  PartitionVerdict verdict;
  const PartitionPoint& latest = *v.back();
  size_t n = std::min(std::max<size_t>(rules.window, 1), v.size());
  size_t first = v.size() - n;
  if (lag_of(latest) <= rules.allowed_lag) return verdict;
  for (size_t i = first; i < v.size(); ++i)
    if (lag_of(*v[i]) == 0) return verdict;
  if (n < 2) return verdict;

  const PartitionPoint& oldest = *v[first];
  std::string over = fmt::format("{} samples over {}", n, format_duration(latest.at - oldest.at));
  for (size_t i = first + 1; i < v.size(); ++i) {
    if (*v[i]->committed >= *v[i - 1]->committed) continue;
    verdict.status = LagStatus::kRewind;
    verdict.reason = fmt::format("the committed offset went back from {} to {}", *v[i - 1]->committed, *v[i]->committed);
    return verdict;
  }

  bool moved = std::any_of(v.begin() + static_cast<long>(first), v.end(),
                           [&](const PartitionPoint* p) { return *p->committed != *oldest.committed; });
  if (!moved) {
    // Unmoved for longer than the window spans: the point before the
    // window had the same offset.
    bool before_too = first > 0 && *v[first - 1]->committed == *oldest.committed;
    Millis span = latest.at - oldest.at;
    if (before_too) {
      std::string base = fmt::format("offset {} has not moved for longer than the window ({}), lag {}",
                                     *latest.committed, over, lag_of(latest));
      if (latest.committed_at) {
        Millis quiet = latest.at - *latest.committed_at;
        if (quiet > span) {
          verdict.status = LagStatus::kStop;
          verdict.reason = fmt::format("{}, and nothing was committed for {}", base, format_duration(quiet));
          return verdict;
        }
      } else if (members) {
        if (*members == 0) {
          verdict.status = LagStatus::kStop;
          verdict.reason = fmt::format("{}, and the group has no active member", base);
          return verdict;
        }
      } else {
        verdict.status = LagStatus::kStop;
        verdict.reason = fmt::format("{} (the broker cannot tell whether the group has active members)", base);
        verdict.stop_without_members = true;
        return verdict;
      }
    }
    verdict.status = LagStatus::kStall;
    verdict.reason = fmt::format("offset {} did not move in {} while lag stayed above 0 (now {})", *latest.committed,
                                 over, lag_of(latest));
    return verdict;
  }

  for (size_t i = first + 1; i < v.size(); ++i)
    if (lag_of(*v[i]) < lag_of(*v[i - 1])) return verdict;
  verdict.status = LagStatus::kWarn;
  verdict.reason = fmt::format("the offset moved from {} to {} in {} but the lag never decreased ({} to {})",
                               *oldest.committed, *latest.committed, over, lag_of(oldest), lag_of(latest));
  return verdict;
}

GroupReport LagEngine::report(const std::vector<LagSample>& history) const {
  GroupReport r;
  if (history.empty()) return r;
  const LagSample& latest = history.back();
  r.subject = latest.subject;
  r.at = latest.at;
  r.members = latest.members;
  r.group_state = latest.group_state;
  std::map<TopicPartition, std::vector<PartitionPoint>> points;
  for (const auto& s : history)
    for (const auto& p : s.partitions)
      points[{p.topic, p.partition}].push_back({s.at, p.committed, p.end, p.committed_at});
  bool judged = false;
  for (const auto& p : latest.partitions) {
    PartitionReport pr;
    pr.sample = p;
    const auto& mine = points[{p.topic, p.partition}];
    for (const auto& point : mine)
      if (point.committed) pr.recent_lags.push_back(lag_of(point));
    auto verdict = judge_partition(mine, latest.members, rules_);
    if (verdict) {
      pr.status = verdict->status;
      pr.reason = verdict->reason;
      pr.stop_without_members = verdict->stop_without_members;
      r.stop_without_members = r.stop_without_members || verdict->stop_without_members;
      if (!judged || verdict->status > r.status) {
        r.status = verdict->status;
        r.reason = verdict->status == LagStatus::kOk ? "" : fmt::format("{}: {}", where(p), verdict->reason);
      }
      judged = true;
    }
    if (auto lag = p.lag()) r.total_lag += *lag;
    if (p.lag_seconds && (!r.max_lag_seconds || *p.lag_seconds > *r.max_lag_seconds)) r.max_lag_seconds = p.lag_seconds;
    r.partitions.push_back(std::move(pr));
  }
  return r;
}

// --- output ----------------------------------------------------------------

namespace {

void append_subject_json(std::string& out, const LagSubject& s) {
  out.append("{\"");
  out.append(s.kind_name());
  out.append("\":");
  append_json_string(out, s.name);
}

void append_optional_int(std::string& out, std::optional<int64_t> v) {
  if (v) {
    append_int(out, *v);
  } else {
    out.append("null");
  }
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
    if (out.empty() || out.back().topic != p.sample.topic) out.push_back({p.sample.topic, 0, 0, std::nullopt});
    TopicTotals& t = out.back();
    ++t.partitions;
    if (auto lag = p.sample.lag()) t.lag += *lag;
    if (p.sample.lag_seconds && (!t.lag_seconds || *p.sample.lag_seconds > *t.lag_seconds))
      t.lag_seconds = p.sample.lag_seconds;
  }
  return out;
}

std::string seconds_cell(std::optional<double> s) { return s ? fmt::format("{:.1f}", *s) : "-"; }

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
  std::vector<std::string> header = {state ? "STATE" : "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                     "LOG-END-OFFSET", "LAG", "LAG-SECONDS", "STATUS"};
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
        table.add_row({r.subject.name, tt.topic, "TOTAL", "", "", std::to_string(tt.lag), seconds_cell(tt.lag_seconds),
                       ""});
      }
      if (topic_ends) ++t;
    }
    table.add_row({r.subject.name, "TOTAL", "", "", "", std::to_string(r.total_lag), seconds_cell(r.max_lag_seconds),
                   lag_status_name(r.status)});
    if (r.stop_without_members)
      notes.push_back(fmt::format("note: {}: STOP judged from the offsets alone: the broker cannot tell whether the "
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
      {"kpipe_consumer_committed_offset", "The committed offset: the next offset the consumer reads.",
       [](const PartitionSample& p) -> std::optional<double> {
         return p.committed ? std::optional<double>(static_cast<double>(*p.committed)) : std::nullopt;
       }},
      {"kpipe_log_end_offset", "The log end offset (high watermark) of the partition.",
       [](const PartitionSample& p) -> std::optional<double> { return static_cast<double>(p.end); }},
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
            [](const GroupReport& r) -> std::optional<double> { return static_cast<double>(r.total_lag); });
  per_group("kpipe_consumer_group_lag_seconds", "The largest lag in seconds of the partitions.",
            [](const GroupReport& r) { return r.max_lag_seconds; });
  per_group("kpipe_consumer_group_members", "Active members of the group (absent: the broker cannot tell).",
            [](const GroupReport& r) -> std::optional<double> {
              if (!r.members) return std::nullopt;
              return static_cast<double>(*r.members);
            });
  per_group("kpipe_lag_sample_timestamp_seconds", "When klag took the sample, in seconds since the epoch.",
            [](const GroupReport& r) -> std::optional<double> { return static_cast<double>(r.at) / 1000.0; });
  if (reports.empty()) return;
  append_help(out, "kpipe_consumer_group_status", "The status by Burrow's rules: 1 for the current one, else 0.");
  for (const auto& r : reports) {
    for (LagStatus s : kAllStatuses) {
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
    long i = top <= 0 ? 0 : std::lround(7.0 * static_cast<double>(std::max<int64_t>(v, 0)) / static_cast<double>(top));
    out += kBars[std::clamp<long>(i, 0, 7)];
  }
  return out;
}

std::vector<std::string> check_alerts(const std::vector<GroupReport>& reports, const AlertSettings& alerts) {
  std::vector<std::string> out;
  for (const auto& r : reports) {
    if (alerts.max_lag && r.total_lag > *alerts.max_lag)
      out.push_back(fmt::format("{}: lag {} is over --max-lag {}", subject_text(r.subject), r.total_lag, *alerts.max_lag));
    if (alerts.max_lag_seconds) {
      const PartitionReport* worst = nullptr;
      for (const auto& p : r.partitions)
        if (p.sample.lag_seconds && *p.sample.lag_seconds > *alerts.max_lag_seconds &&
            (worst == nullptr || *p.sample.lag_seconds > *worst->sample.lag_seconds))
          worst = &p;
      if (worst != nullptr)
        out.push_back(fmt::format("{}: {} is {:.1f}s behind, over --max-lag-seconds {}", subject_text(r.subject),
                                  where(worst->sample), *worst->sample.lag_seconds, *alerts.max_lag_seconds));
    }
    if (alerts.fail_on && r.status >= *alerts.fail_on)
      out.push_back(fmt::format("{} is {} (--fail-on {}): {}", subject_text(r.subject), lag_status_name(r.status),
                                lag_status_name(*alerts.fail_on), r.reason));
  }
  return out;
}

}  // namespace kpipe
