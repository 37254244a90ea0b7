// Reading a Kinesis stream's shards (kconsume -t kinesis:NAME, issue 37):
// every shard of the stream, a child only once its parents are read to
// their end (ShardLineage), at most the service's 5 GetRecords calls a
// second per shard and without starving any, an expired or refused
// iterator renewed after the last record read, and a closed shard's
// children followed from its last page. Sequence numbers stay text.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kpipe/kinesis/kinesis_client.h"
#include "kpipe/kinesis/shards.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// Where reading a shard starts (GetShardIterator's types).
struct ShardStart {
  enum class Kind { kTrimHorizon, kLatest, kAtTimestamp, kAfterSequence };
  Kind kind = Kind::kTrimHorizon;
  std::string sequence;  // kAfterSequence
  Millis time = 0;       // kAtTimestamp
};

// GetShardIterator's request body.
std::string shard_iterator_body(std::string_view stream, std::string_view shard,
                                const ShardStart& start);

// As many records as one call asks for: the service caps a call at 10 MiB
// or 10,000 records.
constexpr size_t kGetRecordsLimit = 10000;

// The service allows 5 GetRecords calls a second per shard.
constexpr Millis kGetRecordsInterval = 200;

// The arrival time of the first record of `shard` from `start` on: none
// when there is none yet (the shard is at its tip, or closed and read to
// its end). klag's lag in seconds of a shard (klag(1), Kinesis): a record
// or two read, never the backlog. Pages the service answers empty while
// still behind (a stretch of the shard with no record) are read past, at
// the rate it allows, for up to `timeout` (--timeout), then an error.
Expected<std::optional<Millis>> first_arrival(KinesisClient& client, const std::string& stream,
                                              const Shard& shard, const ShardStart& start,
                                              Clock& clock, Millis timeout);

class StreamReader {
 public:
  struct Event {
    // kAdded: a shard the caller was not given (a child a split or a
    // merge made) is about to be read for the first time.
    enum class Kind { kRecord, kCaughtUp, kClosed, kAdded };
    Kind kind = Kind::kRecord;
    const Shard* shard = nullptr;
    const KinesisRecord* record = nullptr;  // kRecord
  };
  using Handler = std::function<Status(const Event&)>;
  // Where each shard starts, the first time it is read (a child found
  // later included): a checkpoint's sequence, or --from; `added` for a
  // shard the caller did not know (announced with kAdded before it is
  // read); no start for a shard not to be read at all, which counts as read
  // to its end for its children's sake.
  struct Plan {
    std::optional<ShardStart> start = ShardStart{};
    bool added = false;
  };
  using Starts = std::function<Plan(const Shard&)>;

  StreamReader(KinesisClient& client, std::string stream, Clock& clock);

  // Lists the stream's shards (every page); an error naming the stream if
  // it does not exist.
  Status open(Starts starts);
  // One GetRecords for each shard that may be read and is due, then
  // waits (on the clock) until the next is due when none was. Passes each
  // record, and each shard that is caught up (at the tip: on reaching it,
  // and after records read up to it) or closed (read to its end, its
  // children now readable).
  Status poll(const Handler& handler);

  // Every readable shard is at its tip, none waits for a parent
  // (kconsume -e), as its last answer at or after `since` (steady time)
  // said: records written before `since` have all been read.
  bool caught_up(Millis since = 0) const;
  // Stops reading the shard (kconsume --until, or a shard --partitions
  // leaves out): it is no longer polled, and counts as read to its end
  // for its children's sake, so that a child asked for is read rather
  // than waiting forever for a parent nobody reads. (Past --until, a
  // parent's children hold only later records: each is paused in turn at
  // its first.)
  void pause(const std::string& id) {
    paused_.insert(id);
    lineage_.finish(id);
  }
  const ShardLineage& lineage() const { return lineage_; }
  // The last sequence read of each shard.
  const std::map<std::string, std::string>& last_read() const { return last_read_; }
  uint64_t calls() const { return calls_; }
  uint64_t renewed() const { return renewed_; }

 private:
  struct Cursor {
    std::string iterator;  // "" until asked for
    Millis due = 0;        // steady time of its next allowed call
    Millis answered = -1;  // steady time its last GetRecords was sent
    bool at_tip = false;
  };
  Status fetch(const Shard& shard, Cursor& cursor, const Handler& handler);
  Status renew(const Shard& shard, Cursor& cursor);

  KinesisClient& client_;
  std::string stream_;
  Clock& clock_;
  Starts starts_;
  ShardLineage lineage_;
  std::map<std::string, Cursor> cursors_;
  std::set<std::string> paused_;
  std::map<std::string, std::string> last_read_;
  uint64_t calls_ = 0;
  uint64_t renewed_ = 0;
};

}  // namespace kpipe
