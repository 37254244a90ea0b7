// The lag engine behind klag: lag in records and in seconds, Burrow's
// health rules over a partition's recent samples, kafka-lag-exporter's
// offset-to-time interpolation, and the three output formats. Pure: no
// broker and no database here (programs/klag.cpp brings them), so every rule is
// tested with hand-built samples and an injected Clock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/partition.h"
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

// One partition as one sample saw it.
// "group 'billing'": how messages name a subject.
std::string subject_text(const LagSubject& s);

struct PartitionSample {
  std::string topic;
  int32_t partition = 0;
  std::optional<int64_t> committed;    // none: nothing committed here yet
  int64_t end = 0;                     // the log end offset (high watermark)
  std::optional<Millis> committed_at;  // when it was committed (state files know)
  std::optional<double> lag_seconds;   // measured or estimated; none: unknown
  // Records behind the end; none without a committed offset.
  std::optional<int64_t> lag() const;
};

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
  std::optional<int64_t> committed;
  int64_t end = 0;
  std::optional<Millis> committed_at;
  // The timestamp of the first record at or after the committed offset,
  // when it was fetched.
  std::optional<Millis> record_timestamp;
};

struct RuleSettings {
  size_t window = 10;       // samples judged
  int64_t allowed_lag = 0;  // a latest lag up to this is OK
};

struct PartitionReport {
  PartitionSample sample;
  std::optional<LagStatus> status;    // none: no committed offset to judge
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
  int64_t total_lag = 0;
  std::optional<double> max_lag_seconds;
  LagStatus status = LagStatus::kOk;
  std::string reason;  // the worst partition's, when not OK
  bool stop_without_members = false;
};

// The engine: stamps readings into samples with the clock's time and
// judges a subject's samples.
class LagEngine {
 public:
  LagEngine(Clock& clock, RuleSettings rules) : clock_(clock), rules_(rules) {}

  // A sample taken now. Lag in seconds is now minus the fetched record's
  // timestamp (0 when caught up); where no timestamp was fetched it is
  // estimated from `timelines` (end offsets seen before, by partition).
  LagSample sample(const LagSubject& subject, std::optional<int64_t> members,
                   std::string group_state, const std::vector<PartitionReading>& readings,
                   const std::map<TopicPartition, std::vector<EndOffsetSeen>>& timelines = {});

  // Judges the latest of `history` (one subject's samples, oldest first,
  // the latest last) by Burrow's rules over the last `window` samples.
  GroupReport report(const std::vector<LagSample>& history) const;

  const RuleSettings& rules() const { return rules_; }

 private:
  Clock& clock_;
  RuleSettings rules_;
};

// One partition's state at one sample, for the rules.
struct PartitionPoint {
  Millis at = 0;
  std::optional<int64_t> committed;
  int64_t end = 0;
  std::optional<Millis> committed_at;
};

struct PartitionVerdict {
  LagStatus status = LagStatus::kOk;
  std::string reason;
  bool stop_without_members = false;
};

// Burrow's rules over a partition's points (oldest first, the latest last;
// points without a committed offset are ignored). Up to `window` latest
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
// None when no point has a committed offset.
std::optional<PartitionVerdict> judge_partition(const std::vector<PartitionPoint>& points,
                                                std::optional<int64_t> members,
                                                const RuleSettings& rules);

struct AlertSettings {
  std::optional<int64_t> max_lag;         // a group's total lag above this
  std::optional<double> max_lag_seconds;  // a partition's time lag above this
  std::optional<LagStatus> fail_on;       // a group's status at this or worse
};

// One line per breach, naming the group and the threshold; empty: none.
std::vector<std::string> check_alerts(const std::vector<GroupReport>& reports,
                                      const AlertSettings& alerts);

}  // namespace kpipe
