// What the lag engine's tests and the klag formats' tests share: a
// group's samples over three minutes, to judge and then to write, and the
// readings of a group that never committed on half its partitions.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kpipe/lag.h"
#include "kpipe/time.h"

namespace kpipe::lag_test {

constexpr Millis kT0 = 1'795'946'400'000;

inline LagSample sample_at(Millis at, std::vector<PartitionSample> parts,
                           std::optional<int64_t> members = std::nullopt) {
  LagSample s;
  s.subject = {LagSubject::Kind::kGroup, "billing"};
  s.at = at;
  s.members = members;
  s.partitions = std::move(parts);
  return s;
}

inline PartitionSample part(std::string topic, int32_t p, std::optional<int64_t> committed,
                            int64_t end, std::optional<double> seconds = std::nullopt) {
  return {std::move(topic), p, committed, end, std::nullopt, seconds};
}

inline std::vector<LagSample> billing_history() {
  // events [0] stalls at 10 while its end grows; events [1] keeps up;
  // audit [0] has never been committed.
  return {
      sample_at(kT0, {part("audit", 0, std::nullopt, 5), part("events", 0, 10, 20),
                      part("events", 1, 30, 30)}),
      sample_at(kT0 + kMinute, {part("audit", 0, std::nullopt, 6), part("events", 0, 10, 30),
                                part("events", 1, 38, 40)}),
      sample_at(kT0 + 2 * kMinute,
                {part("audit", 0, std::nullopt, 7), part("events", 0, 10, 40, 125.5),
                 part("events", 1, 50, 50, 0.0)}),
  };
}

// kpipe issue 22: `kconsume -g G -c 600` on four partitions committed on
// two; 76 records wait there, and 324 on the two never committed, whose
// oldest records were produced 30 and 40 seconds before kT0 (the
// timestamps klag fetches). `start`: every partition's log start offset.
inline std::vector<PartitionReading> never_committed_readings(int64_t start = 0) {
  std::vector<PartitionReading> r = {
      {"events", 0, 300, 338, std::nullopt, kT0 - 5 * kSecond},
      {"events", 1, 300, 338, std::nullopt, kT0 - 4 * kSecond},
      {"events", 2, std::nullopt, 162, std::nullopt, kT0 - 30 * kSecond},
      {"events", 3, std::nullopt, 162, std::nullopt, kT0 - 40 * kSecond},
  };
  for (auto& p : r) p.start = start;
  return r;
}

}  // namespace kpipe::lag_test
