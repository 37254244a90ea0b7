#include "kpipe/programs/dlq_targets.h"

#include <optional>

#include "kpipe/kafka/dlq.h"
#include "kpipe/store/dlq_store.h"

namespace kpipe {

Expected<std::unique_ptr<DeadLetterSink>> open_dead_letter_sink(const std::string& target,
                                                                const KafkaConfig* kafka,
                                                                Reporter& reporter) {
  if (target.empty()) return usage_error("--on-error dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  if (target.starts_with("kafka:")) {
    std::string topic = target.substr(6);
    if (topic.empty()) return usage_error("--dlq 'kafka:': the topic name is missing");
    if (kafka == nullptr) return usage_error("--dlq '{}' needs brokers: use -b or set KPIPE_BROKERS", target);
    return open_kafka_dead_letters(topic, *kafka, reporter);
  }
  auto store = DlqStore::open(target);
  if (!store) return store.take_error();
  return make_store_sink(std::move(*store));
}

Expected<std::unique_ptr<BadInputHandler>> make_bad_input_handler(const ErrorOptions& options,
                                                                  const std::string& stage, Io& io,
                                                                  const KafkaConfig* kafka) {
  auto mode = parse_on_error(options.on_error);
  if (!mode) return mode.take_error();
  std::unique_ptr<DeadLetterSink> sink;
  if (*mode == OnError::kDlq && options.dlq.empty())
    return usage_error("--on-error dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  if (!options.dlq.empty()) {
    std::optional<KafkaConfig> resolved;
    if (kafka == nullptr && options.dlq.starts_with("kafka:")) {
      KafkaOptions ko;
      auto r = resolve_kafka_config(ko, io.env_brokers);
      if (!r) return r.take_error();
      resolved = std::move(*r);
      kafka = &*resolved;
    }
    auto opened = open_dead_letter_sink(options.dlq, kafka, io.reporter);
    if (!opened) return opened.take_error();
    sink = std::move(*opened);
  }
  return std::make_unique<BadInputHandler>(*mode, std::move(sink), stage, io.clock);
}

}  // namespace kpipe
