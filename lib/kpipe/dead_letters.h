// A dead-letter store as kdlq reads, replays and purges it (kdlq(1)), one
// face over its backends: a database (store/dlq_store.h: --dlq FILE.db or
// postgresql://...) and a Kafka topic (kafka/dlq.h: --dlq kafka:TOPIC).
// What the programs write into a store is DeadLetterSink (dlq_entry.h).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kpipe/dlq_entry.h"
#include "kpipe/dlq_replay.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

class DeadLetters {
 public:
  virtual ~DeadLetters() = default;

  // Every entry matching `filter`, at most `limit` (0: all), in the
  // store's order, each with `replayed` said. `fn` returns false to stop
  // (the reader of the output went). `with_payload`: a database may leave
  // the lines out when they are not shown.
  using Visit = std::function<Expected<bool>(const DlqEntry&)>;
  virtual Status scan(const DlqFilter& filter, size_t limit, bool with_payload,
                      const Visit& fn) = 0;

  // Deletes the entries that are replayed (with `replayed`) and older than
  // `before` (when given), or with `dry_run` only counts them. A topic
  // loses records only from the front of each partition: its purge stops,
  // in each partition, at the first entry that does not qualify.
  virtual Expected<int64_t> purge(bool replayed, std::optional<Millis> before, bool dry_run) = 0;

  // The ledger of a replay of the entries matching `filter`, at most
  // `limit` (0: all). A database lets one replay run at a time: from now
  // on, until this store is closed, another is refused.
  virtual Expected<std::unique_ptr<ReplayLedger>> replay_ledger(const DlqFilter& filter,
                                                                size_t limit, Clock& clock) = 0;

  // The topic a Kafka store is ("" for a database): a replay may not go
  // back into it.
  virtual std::string topic() const { return {}; }
};

}  // namespace kpipe
