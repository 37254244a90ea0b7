// Opening what --dlq names, for every program: a SQLite dead-letter store
// (FILE.db, store/dlq_store.h) or a Kafka topic (kafka:TOPIC, through
// KafkaLog, kafka/kafka_log.h). The one place where the stage layer's
// bad-input handling meets both backends.
#pragma once

#include <memory>
#include <string>

#include "kpipe/dlq_entry.h"
#include "kpipe/kafka/config.h"
#include "kpipe/kafka/kafka_log.h"
#include "kpipe/report.h"
#include "kpipe/stage/bad_input.h"
#include "kpipe/stage/io.h"
#include "kpipe/status.h"

namespace kpipe {

// "FILE.db" (SQLite, the default kind) or "kafka:TOPIC" (needs `kafka`).
Expected<std::unique_ptr<DeadLetterSink>> open_dead_letter_sink(const std::string& target,
                                                                const KafkaLog* kafka);

// The state of --on-error and --dlq for a program, resolved once. Without
// --on-error, --dlq means dlq. Without `kafka`, a kafka: target takes its
// brokers from KPIPE_BROKERS.
Expected<std::unique_ptr<BadInputHandler>> make_bad_input_handler(const ErrorOptions& options,
                                                                  const std::string& stage, Io& io,
                                                                  const KafkaLog* kafka = nullptr);
// The same for a program whose only use of Kafka is --dlq kafka:TOPIC: its
// -b, -X, --config and --timeout, resolved only for such a target.
Expected<std::unique_ptr<BadInputHandler>> make_bad_input_handler(const ErrorOptions& options,
                                                                  const std::string& stage, Io& io,
                                                                  const KafkaOptions& kafka);

}  // namespace kpipe
