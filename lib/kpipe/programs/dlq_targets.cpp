#include "kpipe/programs/dlq_targets.h"

#include "kpipe/store/dlq_store.h"
#include "kpipe/target.h"

namespace kpipe {

Expected<std::unique_ptr<DeadLetterSink>> open_dead_letter_sink(const std::string& target,
                                                                const KafkaLog* kafka,
                                                                Reporter& reporter, Clock& clock,
                                                                const DlqKinesis& kinesis) {
  if (target.empty()) return usage_error("--on-error dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  if (is_kinesis_target(target)) {
    KinesisOptions options;
    if (kinesis.options != nullptr) {
      options = *kinesis.options;
    } else {
      // A program without --region and --endpoint: AWS's variables alone.
      options.env = AwsEnvironment::from_process();
    }
    auto stream = KinesisLog::open(options, target, kinesis.timeout, reporter, clock);
    if (!stream) return stream.take_error();
    return stream->dead_letter_sink();
  }
  Target parsed = parse_target(target);
  if (parsed.kind == TargetKind::kKafka) {
    if (parsed.location.empty()) return usage_error("--dlq 'kafka:': the topic name is missing");
    if (kafka == nullptr)
      return usage_error("--dlq '{}' needs brokers: use -b or set KPIPE_BROKERS", target);
    return kafka->dead_letter_sink(parsed.location);
  }
  auto store = DlqStore::open(target);
  if (!store) return store.take_error();
  return make_store_sink(std::move(*store));
}

namespace {

// --on-error, or without it, what --dlq implies: a store given is a store
// to use (kpipe(7), BAD INPUT).
Expected<OnError> resolve_on_error(const ErrorOptions& options) {
  if (options.on_error.empty()) return options.dlq.empty() ? OnError::kFail : OnError::kDlq;
  return parse_on_error(options.on_error);
}

Expected<std::unique_ptr<BadInputHandler>> make_handler(const ErrorOptions& options,
                                                        const std::string& stage, Io& io,
                                                        const KafkaLog* kafka,
                                                        const DlqKinesis& kinesis) {
  auto mode = resolve_on_error(options);
  if (!mode) return mode.take_error();
  std::unique_ptr<DeadLetterSink> sink;
  if (*mode == OnError::kDlq && options.dlq.empty())
    return usage_error("--on-error dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  if (!options.dlq.empty()) {
    auto opened = open_dead_letter_sink(options.dlq, kafka, io.reporter, io.clock, kinesis);
    if (!opened) return opened.take_error();
    sink = std::move(*opened);
  }
  return std::make_unique<BadInputHandler>(*mode, std::move(sink), stage, io.clock);
}

}  // namespace

Expected<std::unique_ptr<BadInputHandler>> make_bad_input_handler(const ErrorOptions& options,
                                                                  const std::string& stage, Io& io,
                                                                  const KafkaLog* kafka,
                                                                  const KinesisOptions* kinesis) {
  if (kafka == nullptr && is_kafka_target(options.dlq))
    return make_bad_input_handler(options, stage, io, KafkaOptions{}, kinesis);
  DlqKinesis stream{kinesis};
  if (kafka != nullptr) stream.timeout = format_duration(kafka->config().timeout);
  return make_handler(options, stage, io, kafka, stream);
}

Expected<std::unique_ptr<BadInputHandler>> make_bad_input_handler(const ErrorOptions& options,
                                                                  const std::string& stage, Io& io,
                                                                  const KafkaOptions& kafka,
                                                                  const KinesisOptions* kinesis) {
  if (!is_kafka_target(options.dlq))
    return make_handler(options, stage, io, nullptr, {kinesis, kafka.timeout});
  auto log = KafkaLog::open(kafka, io.env_brokers, io.reporter, io.clock);
  if (!log) return log.take_error();
  return make_bad_input_handler(options, stage, io, &*log, kinesis);
}

}  // namespace kpipe
