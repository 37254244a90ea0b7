// Where kdlq replay keeps its position in a dead-letter log that has no
// consumer groups to keep one (--dlq kinesis:STREAM, kdlq(1)): a table of
// the state store (--state, an SQLite file or postgresql://...). Per
// ledger (--group, kdlq-replay.STREAM unless given) and log, where each
// partition resumes, and the batch in flight (its target and mark) while
// one is: what a Kafka dead-letter topic's replay group keeps in its
// committed offsets and their metadata (dlq_log.h).
#pragma once

#include <memory>
#include <string>

#include "kpipe/dlq_log.h"
#include "kpipe/store/sql.h"
#include "kpipe/store/state_lock.h"

namespace kpipe {

class StoredReplayPositions final : public ReplayPositions {
 public:
  // `log`: "kinesis:STREAM". `read_only`: kdlq list and stats, which
  // create and migrate nothing: a store without the table has replayed
  // nothing yet. Otherwise (a replay) the ledger is locked until this is
  // closed, or the process ends however it ends: a second replay of it is
  // refused, naming the first's process.
  static Expected<std::unique_ptr<StoredReplayPositions>> open(const std::string& target,
                                                               std::string ledger, std::string log,
                                                               bool read_only);
  // Over a database already open (tests: SQLite's ":memory:").
  static Expected<std::unique_ptr<StoredReplayPositions>> attach(std::unique_ptr<Database> db,
                                                                 std::string ledger,
                                                                 std::string log);

  Expected<Saved> load() override;
  Status save(const Saved& saved) override;
  std::string describe() const override;

 private:
  StoredReplayPositions(std::unique_ptr<Database> db, std::string ledger, std::string log)
      : db_(std::move(db)), ledger_(std::move(ledger)), log_(std::move(log)) {}

  Status lock();

  std::unique_ptr<Database> db_;
  std::string ledger_;
  std::string log_;
  bool empty_ = false;  // read-only, and the table is not there
  std::unique_ptr<StateLock> lock_;
};

}  // namespace kpipe
