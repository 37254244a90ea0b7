// The Kafka side of dead letters: a topic as a dead-letter sink, a
// dead-letter topic read as a store by kdlq, a consumer group as its
// replay ledger, and a topic as a replay target.
//
// A Kafka dead-letter topic cannot mark a record, so "replayed" is a
// position (dlq_log.h): a consumer group (kdlq-replay.TOPIC unless --group
// says otherwise) whose committed offset in each partition is the first
// entry not yet replayed. While a batch is in flight, the commit's
// metadata holds the target, its mark before the batch, and how far
// entries were handed out (dlq_log.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/dead_letters.h"
#include "kpipe/dlq_entry.h"
#include "kpipe/dlq_log.h"
#include "kpipe/dlq_replay.h"
#include "kpipe/kafka/client.h"
#include "kpipe/kafka/config.h"

namespace kpipe {

// --dlq kafka:TOPIC: dead letters produced to TOPIC, which must exist.
Expected<std::unique_ptr<DeadLetterSink>> open_kafka_dead_letters(const std::string& topic,
                                                                  const KafkaConfig& config,
                                                                  Reporter& reporter, Clock& clock);

// The replay group of a Kafka dead-letter topic when --group is not given.
std::string default_replay_group(const std::string& topic);

// The topic as a dead-letter log, and its replay group as the keeper of
// its position.
class KafkaDlq final : public DeadLetterLog, public ReplayPositions {
 public:
  // `group_use`: what is done with the group, named when the cluster's
  // ACLs refuse it: Read to commit a replay's position, Describe only to
  // read it (kdlq list, stats, purge).
  static Expected<std::unique_ptr<KafkaDlq>> open(const std::string& topic,
                                                  const KafkaConfig& config,
                                                  const std::string& group, Reporter& reporter,
                                                  Clock& clock,
                                                  AclOperation group_use = AclOperation::kRead);

  const std::string& topic() const { return topic_; }
  const std::string& group() const { return group_; }
  // Each partition's low watermark and its end (the high watermark when
  // opened: what came later waits for the next run).
  const std::map<int32_t, LogBounds>& bounds() const { return bounds_; }

  // The group's committed offsets (else the low watermarks) and the
  // commit's metadata ("" when none).
  Expected<Saved> position() { return load(); }
  Expected<Saved> load() override;
  Status save(const Saved& saved) override;
  std::string describe() const override { return fmt::format("group '{}'", group_); }
  std::string name() const override { return "kafka:" + topic_; }

  // Reads from `from` (a partition left out: from its low watermark) up
  // to the ends, partition after partition.
  Status start(const std::map<int32_t, Position>& from) override;
  Expected<std::vector<DlqEntry>> read(size_t max) override;
  Position after(const Position& at) const override { return at.offset() + 1; }
  std::optional<Position> parse_position(std::string_view text) const override;
  std::map<int32_t, Position> origin() const override;

  Status delete_before(const std::map<int32_t, int64_t>& before);

 private:
  KafkaDlq() = default;
  std::string topic_;
  std::string group_;
  std::unique_ptr<Consumer> consumer_;
  Clock* clock_ = nullptr;
  std::map<int32_t, LogBounds> bounds_;
  std::vector<PartitionOffset> queue_;  // partitions to read, with their start
  size_t current_ = 0;
};

// The topic as kdlq reads, replays (its consumer group the ledger) and
// purges it (DeleteRecords).
std::unique_ptr<DeadLetters> make_topic_dead_letters(std::unique_ptr<KafkaDlq> dlq);

// The consumer group as the replay ledger of a Kafka dead-letter topic
// (make_log_ledger).
Expected<std::unique_ptr<ReplayLedger>> make_group_ledger(KafkaDlq& dlq, const DlqFilter& filter,
                                                          size_t limit);

// A topic as a replay target: records go back with their original key,
// headers and timestamp when the entry was an envelope, plus kReplayId.
Expected<std::unique_ptr<ReplayTarget>> make_kafka_target(const std::string& topic,
                                                          const KafkaConfig& config,
                                                          Reporter& reporter, Clock& clock);

}  // namespace kpipe
