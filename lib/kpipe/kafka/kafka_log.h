// Kafka as a log (log.h): what the programs open of it, the one door they
// go through. The options the user gave (-b, -X, --config, --timeout) are
// resolved here; the settings a program's use calls for (a group member's
// rebalance protocol, isolation, a transactional id, the access it asks)
// are made here, so that the programs speak of logs and roles, not of
// librdkafka's properties.
#pragma once

#include <memory>
#include <string>

#include "kpipe/dead_letters.h"
#include "kpipe/dlq_entry.h"
#include "kpipe/dlq_replay.h"
#include "kpipe/kafka/config.h"
#include "kpipe/log.h"
#include "kpipe/report.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// librdkafka's version, for --version.
std::string kafka_library_version();

class KafkaLog {
 public:
  // Resolves the options (kafka/config.h); `env_brokers`: $KPIPE_BROKERS.
  static Expected<KafkaLog> open(const KafkaOptions& options, const char* env_brokers,
                                 Reporter& reporter, Clock& clock);

  // The resolved configuration, which the Schema Registry's settings and
  // a Kafka dead-letter topic share with the log.
  const KafkaConfig& config() const { return config_; }

  struct ReaderSettings {
    std::string group;      // empty: partitions are assigned by hand
    std::string isolation;  // "read_committed", "read_uncommitted"; empty: the configuration's
    // An instance of a consumer group of pipelines (kpipe(7), MANY
    // INSTANCES): a static member of this id, rebalancing the eager way,
    // with one-second heartbeats, unless the configuration says otherwise.
    std::string instance_id;
    // Only the group's offsets are read, none committed (kcheckpoint sync
    // --from-group): a refusal then asks for Describe, not Read.
    bool describe_only = false;
  };
  Expected<OpenedReader> reader(const ReaderSettings& settings) const;

  // `transactional_id` empty: no transactions.
  Expected<OpenedWriter> writer(const std::string& transactional_id = {}) const;

  // A group read from outside (klag); `group` empty: only the records'
  // times and the bounds. `reads_records`: the records' times are read,
  // which a refusal then asks Read on their topics for.
  Expected<std::unique_ptr<GroupLag>> group_lag(const std::string& group, bool reads_records) const;
  Expected<std::unique_ptr<GroupDirectory>> group_directory() const;

  // A topic of dead letters (kafka/dlq.h): bad input's sink (--dlq
  // kafka:TOPIC); the store kdlq reads, replays and purges, its replay
  // position kept by `group` (`replays`: the group is committed to, else
  // only read); and a topic a replay writes to.
  Expected<std::unique_ptr<DeadLetterSink>> dead_letter_sink(const std::string& topic) const;
  Expected<std::unique_ptr<DeadLetters>> dead_letters(const std::string& topic,
                                                      const std::string& group, bool replays) const;
  Expected<std::unique_ptr<ReplayTarget>> replay_target(const std::string& topic) const;

 private:
  KafkaLog(KafkaConfig config, Reporter& reporter, Clock& clock)
      : config_(std::move(config)), reporter_(&reporter), clock_(&clock) {}

  KafkaConfig config_;
  Reporter* reporter_;
  Clock* clock_;
};

}  // namespace kpipe
