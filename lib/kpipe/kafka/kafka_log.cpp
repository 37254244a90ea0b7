#include "kpipe/kafka/kafka_log.h"

#include "kpipe/kafka/admin.h"
#include "kpipe/kafka/client.h"
#include "kpipe/kafka/dlq.h"

namespace kpipe {

namespace {

void set_unless_given(KafkaConfig& config, const char* key, std::string value) {
  if (config.get(key) == nullptr) config.set(key, std::move(value));
}

}  // namespace

Expected<KafkaLog> KafkaLog::open(const KafkaOptions& options, const char* env_brokers,
                                  Reporter& reporter, Clock& clock) {
  auto config = resolve_kafka_config(options, env_brokers);
  if (!config) return config.take_error();
  return KafkaLog(std::move(*config), reporter, clock);
}

Expected<OpenedReader> KafkaLog::reader(const ReaderSettings& settings) const {
  KafkaConfig config = config_;
  if (!settings.isolation.empty()) config.set("isolation.level", settings.isolation);
  if (!settings.instance_id.empty()) {
    // A static member (KIP-345): a restart within the session timeout gets
    // its partitions back without a rebalance.
    set_unless_given(config, "group.instance.id", settings.instance_id);
    // Instances rebalance the eager way: each revokes all its partitions
    // at a checkpoint before it rejoins, so that a transactional kproduce
    // commits the checkpoints in flight under the generation they were
    // read at. Under the cooperative protocol librdkafka rejoins at once,
    // and the group's coordinator would refuse them as a zombie's
    // (kpipe(7), MANY INSTANCES); and one group cannot mix the two.
    set_unless_given(config, "partition.assignment.strategy", "range");
    // Members learn of a rebalance at their next heartbeat, twice in a
    // cooperative one: librdkafka's 3 s made a move pause for 4 s.
    set_unless_given(config, "heartbeat.interval.ms", "1000");
  }
  auto consumer = Consumer::create(config, settings.group, *reporter_, *clock_);
  if (!consumer) return consumer.take_error();
  // Reading a group's offsets asks Describe on it and its topics; a
  // member's reading and committing asks Read.
  if (settings.describe_only)
    (*consumer)->set_access(AclOperation::kDescribe, AclOperation::kDescribe);
  OpenedReader out;
  if (!settings.group.empty()) {
    out.group = consumer->get();
    out.offsets = consumer->get();
  }
  out.log = std::move(*consumer);
  return out;
}

Expected<OpenedWriter> KafkaLog::writer(const std::string& transactional_id) const {
  KafkaConfig config = config_;
  if (!transactional_id.empty()) config.set("transactional.id", transactional_id);
  auto producer = Producer::create(config, *reporter_, *clock_);
  if (!producer) return producer.take_error();
  OpenedWriter out;
  if (!transactional_id.empty()) out.transactions = producer->get();
  out.log = std::move(*producer);
  return out;
}

Expected<std::unique_ptr<GroupLag>> KafkaLog::group_lag(const std::string& group,
                                                        bool reads_records) const {
  auto reader = GroupReader::create(config_, group, *reporter_, *clock_);
  if (!reader) return reader.take_error();
  if (reads_records) (*reader)->set_access(AclOperation::kRead, AclOperation::kDescribe);
  return std::unique_ptr<GroupLag>(std::move(*reader));
}

Expected<std::unique_ptr<GroupDirectory>> KafkaLog::group_directory() const {
  auto admin = GroupAdmin::create(config_, *reporter_, *clock_);
  if (!admin) return admin.take_error();
  return std::unique_ptr<GroupDirectory>(std::move(*admin));
}

Expected<std::unique_ptr<DeadLetterSink>> KafkaLog::dead_letter_sink(
    const std::string& topic) const {
  return open_kafka_dead_letters(topic, config_, *reporter_, *clock_);
}

Expected<std::unique_ptr<DeadLetters>> KafkaLog::dead_letters(const std::string& topic,
                                                              const std::string& group,
                                                              bool replays) const {
  auto dlq = KafkaDlq::open(topic, config_, group, *reporter_, *clock_,
                            replays ? AclOperation::kRead : AclOperation::kDescribe);
  if (!dlq) return dlq.take_error();
  return make_topic_dead_letters(std::move(*dlq));
}

Expected<std::unique_ptr<ReplayTarget>> KafkaLog::replay_target(const std::string& topic) const {
  return make_kafka_target(topic, config_, *reporter_, *clock_);
}

}  // namespace kpipe
