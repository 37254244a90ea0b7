// Reading a Kinesis stream's shards (kconsume -t kinesis:NAME, issue 37):
// every shard of the stream, a child only once its parents are read to
// their end (ShardLineage), at most the service's 5 GetRecords calls a
// second per shard and without starving any, an expired or refused
// iterator renewed after the last record read, and a closed shard's
// children followed from its last page. Sequence numbers stay text.
#pragma once

#include <functional>
#include <map>
#include <memory>
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

// Every shard of `stream`, every page of ListShards.
Expected<std::vector<Shard>> list_shards(KinesisClient& client, const std::string& stream);

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

// What one read of a shard gave: a page of GetRecords (polling), or an
// event of its subscription (enhanced fan-out).
struct ShardAnswer {
  std::vector<KinesisRecord> records;
  // Closed and read to its end; `children` then names the shards that
  // follow it (with their parents), when the service said.
  bool ended = false;
  std::vector<Shard> children;
  int64_t millis_behind = 0;  // MillisBehindLatest: 0 at the shard's tip
  // As many records as one answer holds: more may wait behind them though
  // the service says 0 ms behind (kinesalite says 0 of every page).
  bool full = false;
  // Steady time by which the answer was asked for: records written
  // before it are in this answer or an earlier one.
  Millis sent = 0;
};

// Where a shard's records come from: GetRecords at the rate the service
// allows (polling, PollingFetcher) or a subscription the service pushes
// events on (enhanced fan-out, fan_out.h). StreamReader keeps what both
// share: which shards may be read (the lineage), where each starts and
// resumes, and what an answer means; a fetcher only fetches.
class ShardFetcher {
 public:
  virtual ~ShardFetcher() = default;
  // Where a shard is read from when it is (again) asked for: after its
  // last record read, else where the caller started it.
  using StartOf = std::function<ShardStart(const Shard&)>;
  // Takes one answer for a shard (passed as a copy: the lineage may change
  // within, when a closed shard's children are added).
  using Got = std::function<Status(const Shard&, ShardAnswer&)>;
  // Reads the shards of `readable` that are due, passing each answer to
  // `got`; waits (on the clock, or on the connection) when none came. A
  // shard no longer in `readable` (paused, or read to its end) is read no
  // more.
  virtual Status fetch(const std::vector<std::string>& readable, const ShardLineage& lineage,
                       const StartOf& start_of, const Got& got) = 0;
  // Requests made, and reads started again (an iterator renewed, a
  // subscription made anew), for tests and -v.
  virtual uint64_t calls() const = 0;
  virtual uint64_t renewed() const = 0;
};

// Polling: one GetRecords per shard at most every kGetRecordsInterval, an
// expired or refused iterator renewed after the last record read.
class PollingFetcher final : public ShardFetcher {
 public:
  PollingFetcher(KinesisClient& client, std::string stream, Clock& clock);
  Status fetch(const std::vector<std::string>& readable, const ShardLineage& lineage,
               const StartOf& start_of, const Got& got) override;
  uint64_t calls() const override { return calls_; }
  uint64_t renewed() const override { return renewed_; }

 private:
  struct Cursor {
    std::string iterator;  // "" until asked for
    Millis due = 0;        // steady time of its next allowed call
  };
  Status fetch_one(const Shard& shard, Cursor& cursor, const StartOf& start_of, const Got& got);

  KinesisClient& client_;
  std::string stream_;
  Clock& clock_;
  std::map<std::string, Cursor> cursors_;
  uint64_t calls_ = 0;
  uint64_t renewed_ = 0;
};

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

  // Polling (PollingFetcher).
  StreamReader(KinesisClient& client, std::string stream, Clock& clock);
  // Records fetched by `fetcher` (enhanced fan-out).
  StreamReader(KinesisClient& client, std::string stream, std::unique_ptr<ShardFetcher> fetcher);

  // Lists the stream's shards (every page); an error naming the stream if
  // it does not exist.
  Status open(Starts starts);
  // One fetch of the shards that may be read (polling: one GetRecords for
  // each that is due, then a wait on the clock until the next is due when
  // none was; fan-out: the events that came). Passes each
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
  uint64_t calls() const { return fetcher_->calls(); }
  uint64_t renewed() const { return fetcher_->renewed(); }

 private:
  struct Progress {
    Millis answered = -1;  // the `sent` of its last answer
    bool at_tip = false;
  };
  ShardStart start_of(const Shard& shard) const;
  Status take(const Shard& shard, ShardAnswer& answer, const Handler& handler);

  KinesisClient& client_;
  std::string stream_;
  std::unique_ptr<ShardFetcher> fetcher_;
  Starts starts_;
  ShardLineage lineage_;
  std::set<std::string> planned_;
  std::set<std::string> unannounced_;  // added, no answer yet
  std::map<std::string, Progress> progress_;
  std::set<std::string> paused_;
  std::map<std::string, std::string> last_read_;
};

}  // namespace kpipe
