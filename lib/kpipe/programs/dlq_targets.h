// Opening what --dlq names, for every program: a dead-letter store in a
// database (FILE.db or postgresql://..., store/dlq_store.h), a Kafka topic
// (kafka:TOPIC, through KafkaLog, kafka/kafka_log.h) or a Kinesis stream
// (kinesis:STREAM, through KinesisLog, kinesis/kinesis_log.h). The one
// place where the stage layer's bad-input handling meets the backends.
#pragma once

#include <memory>
#include <string>

#include "kpipe/dlq_entry.h"
#include "kpipe/kafka/config.h"
#include "kpipe/kafka/kafka_log.h"
#include "kpipe/kinesis/kinesis_log.h"
#include "kpipe/report.h"
#include "kpipe/stage/bad_input.h"
#include "kpipe/stage/io.h"
#include "kpipe/status.h"

namespace kpipe {

// How a kinesis:STREAM target is reached: the program's --region and
// --endpoint when it has them (else AWS's environment alone), and the
// --timeout of each call.
struct DlqKinesis {
  const KinesisOptions* options = nullptr;
  std::string timeout = KafkaOptions{}.timeout;
};

// "FILE.db" (SQLite, the default kind), "postgresql://...", "kafka:TOPIC"
// (needs `kafka`) or "kinesis:STREAM".
Expected<std::unique_ptr<DeadLetterSink>> open_dead_letter_sink(const std::string& target,
                                                                const KafkaLog* kafka,
                                                                Reporter& reporter, Clock& clock,
                                                                const DlqKinesis& kinesis = {});

// The state of --on-error and --dlq for a program, resolved once. Without
// --on-error, --dlq means dlq. Without `kafka`, a kafka: target takes its
// brokers from KPIPE_BROKERS. `kinesis`: the program's --region and
// --endpoint, when it has them.
Expected<std::unique_ptr<BadInputHandler>> make_bad_input_handler(
    const ErrorOptions& options, const std::string& stage, Io& io, const KafkaLog* kafka = nullptr,
    const KinesisOptions* kinesis = nullptr);
// The same for a program whose only use of Kafka is --dlq kafka:TOPIC: its
// -b, -X, --config and --timeout, resolved only for such a target.
Expected<std::unique_ptr<BadInputHandler>> make_bad_input_handler(
    const ErrorOptions& options, const std::string& stage, Io& io, const KafkaOptions& kafka,
    const KinesisOptions* kinesis = nullptr);

}  // namespace kpipe
