// What kconsume's loop, its positions and its checkpoints share: a
// partition's position, and how long each of them waits. Private to
// kconsume*.cpp and their tests.
#pragma once

#include <cstdint>
#include <functional>

#include "kpipe/kafka/kafka_log.h"
#include "kpipe/log.h"
#include "kpipe/programs/kconsume.h"
#include "kpipe/time.h"

namespace kpipe {

// Opens the reader kconsume reads through, with the settings its options
// call for: Kafka's (KafkaLog::reader) when it runs, a log in memory in
// its tests.
using ReaderOpener = std::function<Expected<OpenedReader>(
    const KafkaLog& log, const KafkaLog::ReaderSettings& settings)>;
// run_consume, reading through what `open` opens.
Status run_consume(const ConsumeOptions& options, Io& io, const ReaderOpener& open);

// How long kconsume waits, at exit and before a rebalance takes partitions
// away, for its reader to read what was written, so that their offsets can
// be committed. What is still unread then is read again by the next run.
constexpr Millis kDrainWait = 10 * kSecond;
// How long an instance waits, before its partitions go to another, for the
// checkpoint that hands them over to complete. Past it they go anyway: the
// next owner resumes from the last complete checkpoint, and a completion
// after the take-over is refused (fenced). At exit, the same wait while the
// instance's transactional kproduce commits as this member.
constexpr Millis kHandOverWait = 60 * kSecond;
// How long an instance waits for the committed offsets of partitions it
// is assigned while a transaction of their last owner holds them: past
// librdkafka's default transaction.timeout.ms (60 s), at which Kafka
// aborts the transaction of an owner that never came back.
constexpr Millis kTransactionHoldWait = 75 * kSecond;

// Where kconsume is in one partition it holds.
struct ConsumePosition {
  Position next;  // where reading resumes (Kafka: the next offset)
  bool at_end = false;
  Position end = kNoEnd;  // --until: the position it ends before
  bool ended = false;     // at --until's end: nothing more is written
  bool paused = false;
  Position read = -1;       // where the reader resumes after the last record it has read
  Position committed = -1;  // the position last committed
  int64_t epoch = 0;        // an instance's: the epoch it owns the partition at
};

}  // namespace kpipe
