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

int64_t lag_of(const PartitionPoint& p) {
  return std::max<int64_t>(0, p.end - *p.committed);
}

std::string where(const PartitionSample& p) {
  return fmt::format("{} [{}]", p.topic, p.partition);
}

double millis_to_seconds(Millis ms) {
  return static_cast<double>(std::max<Millis>(0, ms)) / 1000.0;
}

}  // namespace

std::string subject_text(const LagSubject& s) {
  return fmt::format("{} '{}'", s.kind_name(), s.name);
}

const char* lag_status_name(LagStatus s) {
  switch (s) {
    case LagStatus::kOk:
      return "OK";
    case LagStatus::kWarn:
      return "WARN";
    case LagStatus::kStall:
      return "STALL";
    case LagStatus::kStop:
      return "STOP";
    case LagStatus::kRewind:
      return "REWIND";
  }
  return "OK";
}

Expected<LagStatus> parse_fail_on(std::string_view text) {
  std::string upper(text);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::vector<std::string> choices = {"WARN", "STALL", "STOP", "REWIND"};
  // Any case is accepted; a message names the word as typed.
  auto found = parse_choice("status", upper, choices);
  if (!found) return unknown_choice("status", text, choices);
  return kLagStatuses[1 + *found];
}

std::optional<int64_t> PartitionSample::lag() const {
  if (!committed) return std::nullopt;
  return std::max<int64_t>(0, end - *committed);
}

// --- lag in seconds --------------------------------------------------------

std::optional<Millis> estimate_produce_time(std::vector<EndOffsetSeen> points, int64_t offset) {
  // One point per offset, seen from its first to its last sight.
  std::sort(points.begin(), points.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
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

LagSample LagEngine::sample(const LagSubject& subject, std::optional<int64_t> members,
                            std::string group_state, const std::vector<PartitionReading>& readings,
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

std::optional<PartitionVerdict> judge_partition(const std::vector<PartitionPoint>& all,
                                                std::optional<int64_t> members,
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
    verdict.reason = fmt::format("the committed offset went back from {} to {}",
                                 *v[i - 1]->committed, *v[i]->committed);
    return verdict;
  }

  bool moved =
      std::any_of(v.begin() + static_cast<long>(first), v.end(),
                  [&](const PartitionPoint* p) { return *p->committed != *oldest.committed; });
  if (!moved) {
    // Unmoved for longer than the window spans: the point before the
    // window had the same offset.
    bool before_too = first > 0 && *v[first - 1]->committed == *oldest.committed;
    Millis span = latest.at - oldest.at;
    if (before_too) {
      std::string base =
          fmt::format("offset {} has not moved for longer than the window ({}), lag {}",
                      *latest.committed, over, lag_of(latest));
      if (latest.committed_at) {
        Millis quiet = latest.at - *latest.committed_at;
        if (quiet > span) {
          verdict.status = LagStatus::kStop;
          verdict.reason =
              fmt::format("{}, and nothing was committed for {}", base, format_duration(quiet));
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
        verdict.reason =
            fmt::format("{} (the broker cannot tell whether the group has active members)", base);
        verdict.stop_without_members = true;
        return verdict;
      }
    }
    verdict.status = LagStatus::kStall;
    verdict.reason = fmt::format("offset {} did not move in {} while lag stayed above 0 (now {})",
                                 *latest.committed, over, lag_of(latest));
    return verdict;
  }

  for (size_t i = first + 1; i < v.size(); ++i)
    if (lag_of(*v[i]) < lag_of(*v[i - 1])) return verdict;
  verdict.status = LagStatus::kWarn;
  verdict.reason =
      fmt::format("the offset moved from {} to {} in {} but the lag never decreased ({} to {})",
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
        r.reason = verdict->status == LagStatus::kOk
                       ? ""
                       : fmt::format("{}: {}", where(p), verdict->reason);
      }
      judged = true;
    }
    if (auto lag = p.lag()) r.total_lag += *lag;
    if (p.lag_seconds && (!r.max_lag_seconds || *p.lag_seconds > *r.max_lag_seconds))
      r.max_lag_seconds = p.lag_seconds;
    r.partitions.push_back(std::move(pr));
  }
  return r;
}

std::vector<std::string> check_alerts(const std::vector<GroupReport>& reports,
                                      const AlertSettings& alerts) {
  std::vector<std::string> out;
  for (const auto& r : reports) {
    if (alerts.max_lag && r.total_lag > *alerts.max_lag)
      out.push_back(fmt::format("{}: lag {} is over --max-lag {}", subject_text(r.subject),
                                r.total_lag, *alerts.max_lag));
    if (alerts.max_lag_seconds) {
      const PartitionReport* worst = nullptr;
      for (const auto& p : r.partitions)
        if (p.sample.lag_seconds && *p.sample.lag_seconds > *alerts.max_lag_seconds &&
            (worst == nullptr || *p.sample.lag_seconds > *worst->sample.lag_seconds))
          worst = &p;
      if (worst != nullptr)
        out.push_back(fmt::format("{}: {} is {:.1f}s behind, over --max-lag-seconds {}",
                                  subject_text(r.subject), where(worst->sample),
                                  *worst->sample.lag_seconds, *alerts.max_lag_seconds));
    }
    if (alerts.fail_on && r.status >= *alerts.fail_on)
      out.push_back(fmt::format("{} is {} (--fail-on {}): {}", subject_text(r.subject),
                                lag_status_name(r.status), lag_status_name(*alerts.fail_on),
                                r.reason));
  }
  return out;
}

}  // namespace kpipe
