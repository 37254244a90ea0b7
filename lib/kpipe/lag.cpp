#include "kpipe/lag.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <regex>
#include <set>
#include <tuple>

#include "kpipe/choices.h"
#include "kpipe/json.h"
#include "kpipe/log.h"
#include "kpipe/text_table.h"

namespace kpipe {

namespace {

int64_t lag_of(const PartitionPoint& p) {
  return p.lag;
}

// A lag as the reasons name it: records, or a Kinesis shard's time.
std::string lag_text(const PartitionPoint& p, int64_t lag) {
  if (p.by_time) return format_duration(lag);
  return std::to_string(lag);
}

// What the reasons call a partition's position.
const char* position_word(const PartitionPoint& p) {
  return p.by_time ? "position" : "offset";
}

// The lag at or below which a partition is OK: --allowed-lag counts
// records, and a Kinesis shard has none to count (klag(1), Kinesis).
int64_t allowed(bool by_time, const RuleSettings& rules) {
  return by_time ? 0 : rules.allowed_lag;
}

std::string where(const PartitionSample& p) {
  return fmt::format("{} [{}]", p.topic, p.partition);
}

// An offset as the reasons name it: an assumed one says so, since nothing
// was committed there.
std::string offset_text(const PartitionPoint& p) {
  switch (p.assumed) {
    case Uncommitted::kEarliest:
      if (p.by_time) return "the shard's start (nothing committed)";
      return fmt::format("{} (nothing committed: the log start)", *p.committed);
    case Uncommitted::kLatest:
      if (p.by_time) return "the shard's end (nothing committed)";
      return fmt::format("{} (nothing committed: the log end)", *p.committed);
    case Uncommitted::kIgnore:
      break;
  }
  return position_text(*p.committed, p.by_time);
}

double millis_to_seconds(Millis ms) {
  return static_cast<double>(std::max<Millis>(0, ms)) / 1000.0;
}

}  // namespace

std::string position_text(const Position& at, bool by_time) {
  if (by_time && at == Position(LogStart::kEarliest)) return "TRIM_HORIZON";
  if (by_time && at == Position(LogStart::kLatest)) return "LATEST";
  if (at.is_time()) return "AT_TIMESTAMP " + format_rfc3339(at.time());
  return at.text();
}

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

namespace {
// In Uncommitted's order: the one spelling of its values.
const std::vector<std::string> kUncommittedNames = {"ignore", "earliest", "latest"};
}  // namespace

const char* uncommitted_name(Uncommitted u) {
  return kUncommittedNames.at(static_cast<size_t>(u)).c_str();
}

Expected<Uncommitted> parse_uncommitted(std::string_view text) {
  auto found = parse_choice("--uncommitted", text, kUncommittedNames);
  if (!found) return found.take_error();
  return static_cast<Uncommitted>(*found);
}

struct GroupSelector::Pattern {
  std::string text;
  std::regex re;
};

bool GroupSelector::is_pattern(std::string_view value) {
  return value.find_first_of("*+?()[]{}|^$\\") != std::string_view::npos;
}

Expected<GroupSelector> GroupSelector::create(const std::vector<std::string>& values,
                                              bool all_groups) {
  GroupSelector g;
  g.all_ = all_groups;
  std::set<std::string> seen;
  for (const auto& v : values) {
    if (v.empty()) return usage_error("-g: the group name is empty");
    if (!seen.insert(v).second) continue;
    if (!is_pattern(v)) {
      g.names_.push_back(v);
      continue;
    }
    try {
      g.patterns_.push_back(std::make_shared<const Pattern>(
          Pattern{v, std::regex(v, std::regex::ECMAScript | std::regex::optimize)}));
    } catch (const std::regex_error& e) {
      return usage_error("-g '{}' is not a regular expression: {}", v, e.what());
    }
  }
  return g;
}

std::vector<std::string> GroupSelector::select(const std::vector<std::string>& listed) const {
  std::vector<std::string> out = names_;
  std::set<std::string> taken(names_.begin(), names_.end());
  std::vector<std::string> found;
  for (const auto& id : listed) {
    if (taken.count(id)) continue;
    bool match = all_ || std::any_of(patterns_.begin(), patterns_.end(),
                                     [&](const auto& p) { return std::regex_match(id, p->re); });
    if (match && taken.insert(id).second) found.push_back(id);
  }
  std::sort(found.begin(), found.end());
  out.insert(out.end(), found.begin(), found.end());
  return out;
}

std::string GroupSelector::describe() const {
  if (all_) return "--all-groups";
  std::string out;
  for (const auto& p : patterns_) {
    if (!out.empty()) out += ", ";
    out += fmt::format("-g '{}'", p->text);
  }
  return out;
}

std::optional<Position> PartitionSample::position() const {
  if (committed) return committed;
  switch (assumed) {
    case Uncommitted::kEarliest:
      if (by_time) return Position(LogStart::kEarliest);
      if (start) return *start;
      return std::nullopt;
    case Uncommitted::kLatest:
      if (by_time) return Position(LogStart::kLatest);
      return end;
    case Uncommitted::kIgnore:
      break;
  }
  return std::nullopt;
}

std::optional<int64_t> PartitionSample::lag() const {
  if (by_time) return std::nullopt;
  auto from = position();
  if (!from) return std::nullopt;
  return std::max<int64_t>(0, end - from->offset());
}

std::optional<int64_t> PartitionSample::judged_lag() const {
  if (!by_time) return lag();
  if (!position()) return std::nullopt;
  return lag_seconds ? std::llround(*lag_seconds * 1000.0) : 0;
}

std::optional<int64_t> read_offset(const PartitionReading& r, Uncommitted uncommitted) {
  std::optional<int64_t> from;
  if (r.committed) from = r.committed->offset();
  if (!from && uncommitted == Uncommitted::kEarliest) from = r.start;
  if (!from || *from >= r.end) return std::nullopt;
  // Below the log start, the record is gone: the oldest one left is the
  // best answer there is.
  return r.start ? std::max(*from, *r.start) : *from;
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
    p.start = r.start;
    p.by_time = r.by_time;
    if (!r.committed) p.assumed = uncommitted_;
    // Where the lag counts from; lag in seconds of an assumed position is
    // that of its record, as for a committed one.
    auto from = p.position();
    if (from && r.by_time) {
      // A Kinesis shard: as old as the first record after its position;
      // caught up without one, and from its end (kLatest).
      bool behind = r.record_timestamp && p.assumed != Uncommitted::kLatest;
      p.lag_seconds = behind ? millis_to_seconds(s.at - *r.record_timestamp) : 0.0;
    } else if (from) {
      if (from->offset() >= r.end) {
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
        auto produced = estimate_produce_time(std::move(points), from->offset());
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
  if (lag_of(latest) <= allowed(latest.by_time, rules)) return verdict;
  for (size_t i = first; i < v.size(); ++i)
    if (lag_of(*v[i]) == 0) return verdict;
  if (n < 2) return verdict;

  const PartitionPoint& oldest = *v[first];
  std::string over = fmt::format("{} samples over {}", n, format_duration(latest.at - oldest.at));
  for (size_t i = first + 1; i < v.size(); ++i) {
    if (*v[i]->committed >= *v[i - 1]->committed) continue;
    verdict.status = LagStatus::kRewind;
    verdict.reason = fmt::format(
        "the {}{} went back from {} to {}",
        v[i]->assumed == Uncommitted::kIgnore && v[i - 1]->assumed == Uncommitted::kIgnore
            ? "committed "
            : "",
        position_word(*v[i]), offset_text(*v[i - 1]), offset_text(*v[i]));
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
      std::string base = fmt::format("{} {} has not moved for longer than the window ({}), lag {}",
                                     position_word(latest), offset_text(latest), over,
                                     lag_text(latest, lag_of(latest)));
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
    verdict.reason = fmt::format("{} {} did not move in {} while lag stayed above 0 (now {})",
                                 position_word(latest), offset_text(latest), over,
                                 lag_text(latest, lag_of(latest)));
    return verdict;
  }

  for (size_t i = first + 1; i < v.size(); ++i)
    if (lag_of(*v[i]) < lag_of(*v[i - 1])) return verdict;
  verdict.status = LagStatus::kWarn;
  verdict.reason =
      fmt::format("the {} moved from {} to {} in {} but the lag never decreased ({} to {})",
                  position_word(latest), offset_text(oldest), offset_text(latest), over,
                  lag_text(oldest, lag_of(oldest)), lag_text(latest, lag_of(latest)));
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
      points[{p.topic, p.partition}].push_back(
          {s.at, p.position(), p.judged_lag().value_or(0), p.committed_at,
           p.is_assumed() ? p.assumed : Uncommitted::kIgnore, p.by_time});
  bool judged = false;
  r.by_time =
      !latest.partitions.empty() && std::all_of(latest.partitions.begin(), latest.partitions.end(),
                                                [](const PartitionSample& p) { return p.by_time; });
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
    if (auto lag = p.lag()) {
      r.total_lag += *lag;
      if (p.is_assumed()) {
        r.assumed_lag += *lag;
        ++r.assumed_partitions;
      }
    }
    if (p.lag_seconds && (!r.max_lag_seconds || *p.lag_seconds > *r.max_lag_seconds))
      r.max_lag_seconds = p.lag_seconds;
    r.partitions.push_back(std::move(pr));
  }
  return r;
}

std::vector<LagStatus> LagEngine::statuses(const std::vector<LagSample>& history,
                                           size_t depth) const {
  // report() judges each partition of a sample by judge_partition() over
  // its points with an offset among the samples given: the last `window`
  // of them, and the one before. Each of its questions (a zero lag in the
  // window? did the offset go back, move, the lag decrease?) is answered
  // here by the newest point where the answer changed, kept as each
  // partition's points arrive, so that a sample costs a few comparisons
  // per partition whatever the window. The unit test holds the two to the
  // same verdicts.
  const size_t window = std::max<size_t>(rules_.window, 1);
  const size_t ring = window + 1;  // the points judge_partition can look at
  struct Track {
    TopicPartition key;
    // The last `ring` points, at n % ring.
    std::vector<Position> offset;
    std::vector<int64_t> lag;
    std::vector<Millis> at;
    std::vector<size_t> sample;          // the index in `history` of each point
    std::optional<Millis> committed_at;  // the newest point's
    bool by_time = false;                // a Kinesis shard: lag in ms, none allowed
    size_t n = 0;                        // points so far
    // The newest point (1-based; 0: none) with a zero lag, with an offset
    // below the one before it, other than it, and with a lag below it.
    size_t zero = 0, back = 0, moved = 0, fell = 0;
  };
  std::vector<Track> tracks;
  std::map<TopicPartition, size_t> track_of;
  // The track of each partition of the previous sample, by position: a
  // history's samples mostly hold the same partitions in the same order,
  // so most look-ups are one comparison.
  std::vector<size_t> previous, current;
  std::vector<LagStatus> out;
  out.reserve(history.size());
  for (size_t i = 0; i < history.size(); ++i) {
    const LagSample& s = history[i];
    current.resize(s.partitions.size());
    for (size_t j = 0; j < s.partitions.size(); ++j) {
      const PartitionSample& p = s.partitions[j];
      size_t t;
      if (j < previous.size() && tracks[previous[j]].key.partition == p.partition &&
          tracks[previous[j]].key.topic == p.topic) {
        t = previous[j];
      } else {
        TopicPartition key{p.topic, p.partition};
        auto [it, added] = track_of.try_emplace(key, tracks.size());
        if (added) {
          Track track;
          track.key = std::move(key);
          track.offset.resize(ring);
          track.lag.resize(ring);
          track.at.resize(ring);
          track.sample.resize(ring);
          tracks.push_back(std::move(track));
        }
        t = it->second;
      }
      current[j] = t;
      auto position = p.position();
      if (!position) continue;
      Track& track = tracks[t];
      int64_t lag = *p.judged_lag();
      size_t k = track.n % ring;
      size_t number = track.n + 1;
      if (track.n > 0) {
        size_t before = (track.n - 1) % ring;
        if (*position < track.offset[before]) track.back = number;
        if (*position != track.offset[before]) track.moved = number;
        if (lag < track.lag[before]) track.fell = number;
      }
      if (lag == 0) track.zero = number;
      track.offset[k] = *position;
      track.lag[k] = lag;
      track.at[k] = s.at;
      track.sample[k] = i;
      track.committed_at = p.committed_at;
      track.by_time = p.by_time;
      track.n = number;
    }
    size_t lowest = depth == 0 || i + 1 < depth ? 0 : i + 1 - depth;
    LagStatus status = LagStatus::kOk;
    for (size_t j = 0; j < s.partitions.size() && status != LagStatus::kRewind; ++j) {
      const Track& track = tracks[current[j]];
      const size_t n = track.n;
      if (n == 0) continue;
      // The points among the samples judged: at most `ring` of them.
      size_t count = 0;
      while (count < std::min(n, ring) && track.sample[(n - 1 - count) % ring] >= lowest) ++count;
      if (count == 0) continue;  // no offset to judge
      const size_t latest = (n - 1) % ring;
      if (track.lag[latest] <= allowed(track.by_time, rules_)) continue;
      size_t judged = std::min(window, count);
      size_t first = n - judged + 1;  // the window's oldest point, 1-based
      if (track.zero >= first || judged < 2) continue;
      if (track.back > first) {
        status = LagStatus::kRewind;
        continue;
      }
      LagStatus verdict = LagStatus::kWarn;
      if (track.moved <= first) {
        verdict = LagStatus::kStall;
        // Unmoved for longer than the window spans: the point before the
        // window had the same offset.
        bool before_too =
            judged < count && track.offset[(first - 2) % ring] == track.offset[(first - 1) % ring];
        if (before_too) {
          if (track.committed_at) {
            Millis span = track.at[latest] - track.at[(first - 1) % ring];
            if (track.at[latest] - *track.committed_at > span) verdict = LagStatus::kStop;
          } else if (!s.members || *s.members == 0) {
            verdict = LagStatus::kStop;
          }
        }
      } else if (track.fell > first) {
        verdict = LagStatus::kOk;
      }
      status = std::max(status, verdict);
    }
    out.push_back(status);
    previous.swap(current);
  }
  return out;
}

std::vector<std::string> check_alerts(const std::vector<GroupReport>& reports,
                                      const AlertSettings& alerts) {
  std::vector<std::string> out;
  for (const auto& r : reports) {
    if (alerts.max_lag && r.total_lag > *alerts.max_lag) {
      // What a consumer of the group would read but has never committed
      // on is the surprise in such a figure: say how much of it that is.
      std::string assumed;
      if (r.assumed_lag > 0)
        assumed =
            fmt::format(" ({} of it on {} partition{} without a committed offset)", r.assumed_lag,
                        r.assumed_partitions, r.assumed_partitions == 1 ? "" : "s");
      out.push_back(fmt::format("{}: lag {} is over --max-lag {}{}", subject_text(r.subject),
                                r.total_lag, *alerts.max_lag, assumed));
    }
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
