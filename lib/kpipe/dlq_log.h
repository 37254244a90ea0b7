// Dead letters kept as the records of a log, a Kafka topic (kafka/dlq.h)
// or a Kinesis stream (kinesis/kinesis_log.h), read by kdlq as a store.
// A log cannot mark a record, so "replayed" is a position in each
// partition: every entry before it was delivered, or passed over by the
// filters (which is why a filtered replay needs a ledger of its own). The
// position is kept elsewhere (ReplayPositions): a Kafka consumer group's
// committed offsets, or a table of the state store (--state) for a
// stream, which has no groups. It advances only over entries delivered.
// While a batch is in flight to a target that acknowledges later, the
// target and its mark before the batch are kept with it, for the next
// replay to settle what a killed one left in doubt (dlq_replay.h), and
// how far entries were handed out in each partition since the mark: the
// entries in doubt are those the filter matches from the position up to
// there, read again for a target that finds them by their content (a
// Kinesis stream). Never a list of entries: a Kafka commit's metadata is
// small (offset.metadata.max.bytes). One ledger serves every log and
// every keeper: make_log_ledger.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/dead_letters.h"
#include "kpipe/dlq_entry.h"
#include "kpipe/dlq_replay.h"
#include "kpipe/position.h"
#include "kpipe/status.h"

namespace kpipe {

// The entries of a dead-letter log, partition by partition.
class DeadLetterLog {
 public:
  virtual ~DeadLetterLog() = default;
  // "kafka:TOPIC", "kinesis:STREAM": replay ids are this, ':', and the
  // entry's id_text().
  virtual std::string name() const = 0;
  // Reads each partition from where `from` says it resumes (a partition
  // left out: from its start) up to its end as of now; read() returns up
  // to `max` entries, each with its position, none at the end.
  virtual Status start(const std::map<int32_t, Position>& from) = 0;
  virtual Expected<std::vector<DlqEntry>> read(size_t max) = 0;
  // Where a partition resumes after the entry at `at`: Kafka's next
  // offset, Kinesis's sequence number itself (read after).
  virtual Position after(const Position& at) const = 0;
  // A position as an entry's id_text() writes it, read back.
  virtual std::optional<Position> parse_position(std::string_view text) const = 0;
  // Where every partition starts: replay --again goes back there.
  virtual std::map<int32_t, Position> origin() const = 0;
};

// The name of a log's replay position when --group gives none:
// kdlq-replay.TOPIC or kdlq-replay.STREAM.
std::string default_replay_ledger(std::string_view log_name);

// Where a log's replay position is kept.
class ReplayPositions {
 public:
  virtual ~ReplayPositions() = default;
  struct Saved {
    // Where each partition resumes; a partition left out: from its start.
    std::map<int32_t, Position> next;
    // The batch in flight, as the ledger writes it; "" when none.
    std::string metadata;
  };
  virtual Expected<Saved> load() = 0;
  // Replaces what is kept.
  virtual Status save(const Saved& saved) = 0;
  // How messages name it: "group 'G'", "ledger 'L' in 'state.db'".
  virtual std::string describe() const = 0;
};

// Whether the entry at `at` lies before the saved position of its
// partition: replayed, or passed over.
bool passed(const DeadLetterLog& log, const ReplayPositions::Saved& saved, int32_t partition,
            const Position& at);

// kdlq list and stats over a log: each entry matching `filter`, at most
// `limit` (0: all), `replayed` said by `saved` (none is without it).
Status scan_dead_letter_log(DeadLetterLog& log, const ReplayPositions::Saved* saved,
                            const DlqFilter& filter, size_t limit, const DeadLetters::Visit& fn);

// The replay ledger of a log whose position `positions` keeps, from
// `saved` (what it held when the replay began): the entries matching
// `filter`, at most `limit` (0: all).
std::unique_ptr<ReplayLedger> make_log_ledger(DeadLetterLog& log, ReplayPositions& positions,
                                              ReplayPositions::Saved saved, const DlqFilter& filter,
                                              size_t limit);

}  // namespace kpipe
