// The lag engine behind klag: lag in records and in seconds, Burrow's
// health rules over a partition's recent samples, kafka-lag-exporter's
// offset-to-time interpolation, and the three output formats. Pure: no
// broker and no database here (programs/klag.cpp brings them), so every rule is
// tested with hand-built samples and an injected Clock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/latency.h"
#include "kpipe/partition.h"
#include "kpipe/position.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// In order of severity: the group's status is its worst partition's, and
// --fail-on S fires at S or worse.
enum class LagStatus : uint8_t { kOk, kWarn, kStall, kStop, kRewind };
inline constexpr LagStatus kLagStatuses[] = {LagStatus::kOk, LagStatus::kWarn, LagStatus::kStall,
                                             LagStatus::kStop, LagStatus::kRewind};

const char* lag_status_name(LagStatus s);  // "OK", "WARN", "STALL", "STOP", "REWIND"
// For --fail-on: WARN, STALL, STOP or REWIND (any case).
Expected<LagStatus> parse_fail_on(std::string_view text);

// Whose offsets: a Kafka consumer group, or a kpipe pipeline's state file.
struct LagSubject {
  enum class Kind : uint8_t { kGroup, kState };
  Kind kind = Kind::kGroup;
  std::string name;  // the group id, or the state file's path
  auto operator<=>(const LagSubject&) const = default;
  const char* kind_name() const { return kind == Kind::kGroup ? "group" : "state"; }
};

// "group 'billing'": how messages name a subject.
std::string subject_text(const LagSubject& s);

// What a partition of a consumed topic without a committed offset counts
// as (--uncommitted): where a consumer of the group would begin reading
// it, by auto.offset.reset. kEarliest: at the log start offset, so every
// record there is lag; kLatest: at the log end, no lag; kIgnore: no lag
// at all, and no verdict (klag before --uncommitted).
enum class Uncommitted : uint8_t { kIgnore, kEarliest, kLatest };
const char* uncommitted_name(Uncommitted u);  // "ignore", "earliest", "latest"
Expected<Uncommitted> parse_uncommitted(std::string_view text);

// Which groups klag samples: -g's names, and -g's patterns (or
// --all-groups) matched against the groups the cluster lists. A -g value
// with any of * + ? ( ) [ ] { } | ^ $ \ is a pattern: an ECMAScript
// regular expression that must match a whole group id. A '.' alone does
// not make one, since group ids are often dotted names ("billing.v2").
class GroupSelector {
 public:
  // A usage error names a value that is not a regular expression.
  static Expected<GroupSelector> create(const std::vector<std::string>& values, bool all_groups);
  static bool is_pattern(std::string_view value);

  // Whether the cluster's groups must be listed: a pattern, or --all-groups.
  bool lists() const { return all_ || !patterns_.empty(); }
  // The names given, in their order, each once.
  const std::vector<std::string>& names() const { return names_; }
  // The groups to sample: the names given, then the listed groups that a
  // pattern matches (every one with --all-groups), sorted, each once.
  std::vector<std::string> select(const std::vector<std::string>& listed) const;
  // "-g 'bill.*'", "-g 'a+', -g 'b+'" or "--all-groups", for messages.
  std::string describe() const;

 private:
  struct Pattern;
  std::vector<std::string> names_;
  std::vector<std::shared_ptr<const Pattern>> patterns_;
  bool all_ = false;
};

// One partition as one sample saw it.
//
// A Kinesis shard's lag is in time alone (`by_time`, klag(1), Kinesis): its
// sequence numbers count no records and its end is not known without
// reading to it, so it has no lag in records, its `end` and `start` mean
// nothing, and Burrow's rules judge its lag in milliseconds instead.
struct PartitionSample {
  std::string topic;
  int32_t partition = 0;
  std::optional<Position> committed;   // none: nothing committed here yet
  int64_t end = 0;                     // the log end offset (high watermark)
  std::optional<Millis> committed_at;  // when it was committed (state files know)
  std::optional<double> lag_seconds;   // measured or estimated; none: unknown
  // Without a committed offset: where the lag was counted from (kIgnore:
  // nowhere). Meaningless where an offset is committed.
  Uncommitted assumed = Uncommitted::kIgnore;
  std::optional<int64_t> start = std::nullopt;  // the log start offset, when read
  bool by_time = false;                         // a Kinesis shard

  // Whether the lag counts from an assumed offset, not a committed one.
  bool is_assumed() const { return !committed && assumed != Uncommitted::kIgnore; }
  // The position the lag counts from: the committed one, else the assumed
  // one (a Kinesis shard's: its start or, for kLatest, the time it was
  // sampled); none: no lag to tell.
  std::optional<Position> position() const;
  // Records behind the end; none without a position, and for a Kinesis
  // shard.
  std::optional<int64_t> lag() const;
  // The lag Burrow's rules judge: in records, or a Kinesis shard's in
  // milliseconds (0 while unknown). None without a position.
  std::optional<int64_t> judged_lag() const;
};

// A position as klag shows it: an offset or a sequence number as it is;
// where a Kinesis shard not yet read from starts in Kinesis's words
// (TRIM_HORIZON, LATEST, AT_TIMESTAMP and the time).
std::string position_text(const Position& at, bool by_time);

struct LagSample {
  LagSubject subject;
  Millis at = 0;
  // Active members of the group; none where the broker cannot tell
  // (kbroker cannot: librdkafka's mock cluster answers no DescribeGroups).
  std::optional<int64_t> members;
  std::string group_state;                  // "Stable", "Empty", ... when known
  std::vector<PartitionSample> partitions;  // by topic, then partition
};

// --- lag in seconds --------------------------------------------------------

// The log end offset as samples saw it: `offset` first seen at `first_seen`
// and last seen at `last_seen`.
struct EndOffsetSeen {
  int64_t offset = 0;
  Millis first_seen = 0;
  Millis last_seen = 0;
};

// When the record at `offset` was produced, estimated from the log end
// offsets seen over time (kafka-lag-exporter's lookup table): linear between
// the last sight of the end at or before `offset` and the first sight of an
// end past it; extrapolated from the first two points when `offset` is
// older than them all. None with fewer than two points around it.
std::optional<Millis> estimate_produce_time(std::vector<EndOffsetSeen> points, int64_t offset);

// What one read of the offsets found for a partition, before time lag.
struct PartitionReading {
  std::string topic;
  int32_t partition = 0;
  std::optional<Position> committed;
  int64_t end = 0;
  std::optional<Millis> committed_at;
  // The timestamp of the first record at or after the committed offset
  // (without one, at the offset read_offset() gives), when it was fetched.
  // A Kinesis shard's: the arrival time of the first record after its
  // position (without one, from its start), none when there is none yet.
  std::optional<Millis> record_timestamp;
  std::optional<int64_t> start = std::nullopt;  // the log start offset (low watermark)
  bool by_time = false;                         // a Kinesis shard (PartitionSample)
};

// The offset whose record's timestamp is the partition's lag in seconds:
// the committed one (the log start where retention deleted it), or
// without one the log start when `uncommitted` is kEarliest; none when no
// record is behind (caught up, kLatest, kIgnore) or the start is unknown.
// A Kafka partition's only.
std::optional<int64_t> read_offset(const PartitionReading& r, Uncommitted uncommitted);

struct RuleSettings {
  size_t window = 10;       // samples judged
  int64_t allowed_lag = 0;  // a latest lag up to this is OK
};

struct PartitionReport {
  PartitionSample sample;
  std::optional<LagStatus> status;    // none: no offset to judge (nothing committed, kIgnore)
  std::string reason;                 // why, when not OK
  bool stop_without_members = false;  // STOP judged without knowing the members
  std::vector<int64_t> recent_lags;   // oldest first, for sparklines
};

struct GroupReport {
  LagSubject subject;
  Millis at = 0;
  std::optional<int64_t> members;
  std::string group_state;
  std::vector<PartitionReport> partitions;
  // A Kinesis stream's (PartitionSample::by_time): no lag in records, so
  // total_lag is none to show.
  bool by_time = false;
  int64_t total_lag = 0;
  // The part of total_lag on partitions without a committed offset, and
  // how many of them were counted so.
  int64_t assumed_lag = 0;
  int64_t assumed_partitions = 0;
  std::optional<double> max_lag_seconds;
  LagStatus status = LagStatus::kOk;
  std::string reason;  // the worst partition's, when not OK
  bool stop_without_members = false;
  // A state file's: the end-to-end latency of the newest complete
  // checkpoint that had records (kcheckpoint history), and its id.
  std::optional<Latency> latency;
  int64_t latency_checkpoint = 0;
};

// The engine: stamps readings into samples with the clock's time and
// judges a subject's samples.
class LagEngine {
 public:
  LagEngine(Clock& clock, RuleSettings rules, Uncommitted uncommitted = Uncommitted::kEarliest)
      : clock_(clock), rules_(rules), uncommitted_(uncommitted) {}

  // A sample taken now. A reading without a committed offset is counted
  // as `uncommitted` says. Lag in seconds is now minus the fetched record's
  // timestamp (0 when caught up); where no timestamp was fetched it is
  // estimated from `timelines` (end offsets seen before, by partition).
  LagSample sample(const LagSubject& subject, std::optional<int64_t> members,
                   std::string group_state, const std::vector<PartitionReading>& readings,
                   const std::map<TopicPartition, std::vector<EndOffsetSeen>>& timelines = {});

  // Judges the latest of `history` (one subject's samples, oldest first,
  // the latest last) by Burrow's rules over the last `window` samples.
  GroupReport report(const std::vector<LagSample>& history) const;

  // The group's status after each sample of `history` (one subject's
  // samples, oldest first), as report() would have judged it then from the
  // last `depth` samples up to it (0: every one before it), which is what
  // klag judged if it kept that many. For klag --plot's marks: in time
  // linear in the history, with no sample copied.
  std::vector<LagStatus> statuses(const std::vector<LagSample>& history, size_t depth) const;

  const RuleSettings& rules() const { return rules_; }
  Uncommitted uncommitted() const { return uncommitted_; }

 private:
  Clock& clock_;
  RuleSettings rules_;
  Uncommitted uncommitted_;
};

// One partition's state at one sample, for the rules.
struct PartitionPoint {
  Millis at = 0;
  // The committed offset, or the assumed one (PartitionSample::position)
  // where `assumed` is not kIgnore: judged alike, since a consumer would
  // read from there, but named so in the reasons.
  std::optional<Position> committed;
  // The lag judged (PartitionSample::judged_lag): records, or for a
  // Kinesis shard (`by_time`) milliseconds.
  int64_t lag = 0;
  std::optional<Millis> committed_at;
  Uncommitted assumed = Uncommitted::kIgnore;
  bool by_time = false;
};

struct PartitionVerdict {
  LagStatus status = LagStatus::kOk;
  std::string reason;
  bool stop_without_members = false;
};

// Burrow's rules over a partition's points (oldest first, the latest last;
// points without an offset are ignored). Up to `window` latest
// points are judged; the one before them, when there is one, tells
// whether an offset that did not move in the window had stopped earlier.
//   OK      the latest lag is within allowed_lag, or a lag in the window is 0
//   REWIND  the committed offset went backwards
//   STOP    the offset has not moved for longer than the window spans and
//           nothing is consuming: the group has no active member, or (a
//           state file) nothing committed for longer than the window spans;
//           where neither is known, the offsets alone decide, and
//           stop_without_members says so
//   STALL   the offset never moved in the window while lag stayed above 0
//   WARN    the offset moved but the lag never decreased
//   OK      otherwise, and with fewer than two points
// None when no point has an offset.
std::optional<PartitionVerdict> judge_partition(const std::vector<PartitionPoint>& points,
                                                std::optional<int64_t> members,
                                                const RuleSettings& rules);

struct AlertSettings {
  std::optional<int64_t> max_lag;         // a group's total lag (assumed lag too) above this
  std::optional<double> max_lag_seconds;  // a partition's time lag above this
  std::optional<LagStatus> fail_on;       // a group's status at this or worse
};

// One line per breach, naming the group and the threshold; empty: none.
std::vector<std::string> check_alerts(const std::vector<GroupReport>& reports,
                                      const AlertSettings& alerts);

}  // namespace kpipe
