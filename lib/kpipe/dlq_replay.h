// kdlq replay: dead letters back to standard output or into a Kafka topic,
// each marked replayed only once it is delivered, so that an interrupted
// replay resumes with no gap and no duplicate.
//
// Two sides meet here. The ledger is where "replayed" is kept: the SQLite
// store's replayed_at column, or a consumer group's committed offsets on a
// Kafka dead-letter topic. The target is where entries go. Standard output
// has delivered a line once its reader has read it (a line that only
// reached a pipe dies with a reader that dies: kpipe(7), CONTROL LINES AND
// CHECKPOINTS), so send() returns then, and the entry is marked right
// after. Kafka acknowledges later: before a batch is sent, the ledger
// records the target's end offsets; once acknowledged, the batch is
// marked. A replay killed in between leaves the batch in doubt, and the
// next one settles it by reading the target from those offsets for the
// kpipe.replay.id header each replayed record carries: what is there is
// marked replayed, the rest is sent again. A Kinesis record has no
// headers: a replay into a stream keeps the time it was about to send a
// batch as its mark, and the next one reads the stream from there for
// records holding exactly an in-doubt entry's partition key and bytes,
// which the ledger gives it (in_doubt_entries).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kpipe/dlq_entry.h"
#include "kpipe/envelope.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// An entry on its way, with the id its record carries (kReplayId).
struct ReplayItem {
  DlqEntry entry;
  std::string replay_id;
};

class ReplayTarget {
 public:
  virtual ~ReplayTarget() = default;
  // "<stdout>" or "kafka:TOPIC": in-doubt batches name the target they
  // went to, and only that target can settle them.
  virtual std::string describe() const = 0;
  // Kafka: send() queues, flush() reports deliveries. Standard output: an
  // entry is delivered when send() returns true (its line was read).
  virtual bool acknowledges_later() const = 0;
  // false when the target has closed (a downstream pipe): nothing was sent.
  virtual Expected<bool> send(const ReplayItem& item, uint64_t tag) = 0;
  // Waits for the fate of everything sent; appends the tags delivered.
  virtual Status flush(std::vector<uint64_t>& delivered) = 0;
  // Where the target ends now (its end offsets), as text for the ledger.
  virtual Expected<std::string> mark() = 0;
  // Whether its records carry no replay id, so that delivered_since finds
  // an entry by what its record holds: it needs the entries in doubt.
  virtual bool finds_by_content() const { return false; }
  // The replay ids starting with `prefix` found in the target after
  // `mark`. `in_doubt`: the entries of the batch, for a target that
  // finds_by_content() (empty for the others).
  virtual Expected<std::set<std::string>> delivered_since(
      const std::string& mark, const std::string& prefix,
      const std::vector<ReplayItem>& in_doubt) = 0;
};

class ReplayLedger {
 public:
  virtual ~ReplayLedger() = default;
  // Replay ids of this store's entries start with this.
  virtual std::string id_prefix() const = 0;

  struct InDoubt {
    std::string target;
    std::string mark;
    size_t entries = 0;  // how many were in flight, when the ledger knows
    size_t index = 0;    // the ledger's own handle
  };
  virtual Expected<std::vector<InDoubt>> in_doubt() = 0;
  // The entries of an in-doubt batch, payloads and replay ids included;
  // nullopt when the ledger cannot tell which entries they were (a log's
  // position whose metadata an older kdlq wrote: dlq_log.h).
  virtual Expected<std::optional<std::vector<ReplayItem>>> in_doubt_entries(const InDoubt&) {
    return std::optional<std::vector<ReplayItem>>();
  }
  // Entries of the batch whose ids are in `delivered` are replayed, the
  // rest pending again. Returns how many were found delivered.
  virtual Expected<size_t> settle(const InDoubt& batch, const std::set<std::string>& delivered) = 0;
  // --again: the matching entries that were replayed become pending.
  virtual Status reset() = 0;
  // The next pending entries, in order; empty at the end.
  virtual Expected<std::vector<ReplayItem>> next(size_t max) = 0;
  // Records a batch as in flight to `target`, which ended at `mark`.
  virtual Status begin(const std::vector<ReplayItem>& batch, const std::string& target,
                       const std::string& mark) = 0;
  // Marks entries replayed (pointers into the last next()'s batch).
  virtual Status delivered(const std::vector<const ReplayItem*>& items) = 0;
  // How many entries the replay would send, when the ledger can tell
  // (for a progress line); after reset() and settling.
  virtual Expected<std::optional<uint64_t>> pending() { return std::optional<uint64_t>(); }
};

struct ReplaySettings {
  size_t batch = 1000;  // entries in flight to Kafka at most
  bool again = false;
  const std::atomic<bool>* stop = nullptr;
  // Called after each batch with the entries replayed so far and how many
  // there were to replay (when the ledger knows): a progress line.
  std::function<void(uint64_t replayed, std::optional<uint64_t> total)> on_progress;
};

struct ReplayReport {
  uint64_t replayed = 0;
  uint64_t batches_in_doubt = 0;  // batches an earlier run left in flight
  uint64_t in_doubt = 0;          // their entries, when the ledger knows
  uint64_t found_delivered = 0;   // of those, found at the target
  bool target_closed = false;     // a downstream pipe closed
  bool stopped = false;           // SIGINT or SIGTERM
};

// What a replay produces for an entry (kReplayId aside): the record it
// came from when the line was an envelope (a Kafka entry's record, or an
// envelope line with a source position), else the line as the value.
OwnedRecord replay_record(const DlqEntry& entry, EnvelopeReader& reader);

Expected<ReplayReport> run_replay(ReplayLedger& ledger, ReplayTarget& target,
                                  const ReplaySettings& settings);

}  // namespace kpipe
