// The pipeline's state database (--state FILE, kpipe(7), CONTROL LINES AND CHECKPOINTS): an SQLite
// file or a PostgreSQL database (STORES) shared by the stages of one pipeline, or by all the
// instances of a consumer group of pipelines (MANY INSTANCES). It holds the checkpoints (emitted by
// kconsume, completed by the terminal stage with their offsets) and each stage's state snapshots,
// versioned by checkpoint so that a restart restores exactly the state of the newest complete
// checkpoint.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/control.h"
#include "kpipe/latency.h"
#include "kpipe/partition.h"
#include "kpipe/snapshot.h"
#include "kpipe/status.h"
#include "kpipe/store/sql.h"
#include "kpipe/store/state_lock.h"
#include "kpipe/time.h"

namespace kpipe {

struct StoredOffset {
  std::string topic;
  int32_t partition = 0;
  Position offset;         // where reading resumes (Kafka: the next offset)
  int64_t checkpoint = 0;  // the checkpoint that stored it (0: set by hand)
  Millis committed_at = 0;
};

struct CheckpointLatency {
  int64_t checkpoint = 0;
  Latency latency;
};

struct CheckpointRecord {
  int64_t id = 0;
  Millis emitted_at = 0;
  std::optional<Millis> completed_at;
  std::string completed_by;
  int64_t partitions = 0;
  // End to end, for the records it covered (kconsume gave their times).
  std::optional<Latency> latency;
};

// A partition an instance of a consumer group of pipelines took over
// (kpipe(7), MANY INSTANCES): the epoch it owns it at, and where it
// resumes.
struct PartitionClaim {
  TopicPartition partition;
  int64_t epoch = 0;
  std::optional<Position> offset;  // the stored position, if any
  int64_t checkpoint = 0;          // the checkpoint that stored it (0: none, or set by hand)
};

struct SnapshotRecord {
  std::string stage;
  int64_t checkpoint = 0;
  Millis saved_at = 0;
  int64_t entries = 0;  // entries written for this checkpoint (the increment)
  int64_t bytes = 0;
};

// How a fault of a state file names it (OpenOptions): "state database
// 'p.db': ...", "is not a kpipe state database".
OpenOptions state_options();

class StateStore {
 public:
  ~StateStore();
  // Opens (creating, mode 0600, WAL) and migrates the state tables.
  static Expected<std::unique_ptr<StateStore>> open(const std::string& path);
  // An existing state file, read-only, for the commands that only read it
  // (kcheckpoint show, history, export, verify): never creates a file, works
  // on one the user may only read, and refuses a file that is not a state
  // database or is at another schema version, naming it.
  static Expected<std::unique_ptr<StateStore>> open_existing(const std::string& path);
  // The same tables on a database the caller already holds (kupsert writes
  // its rows and completes checkpoints in one transaction of its own).
  static Expected<std::unique_ptr<StateStore>> attach(Database& db);

  Database& db() { return *db_; }

  // --- who writes ---------------------------------------------------------
  // The locks of kpipe(7), CONTROL LINES AND CHECKPOINTS, held until the
  // store is closed (or the process dies). Each fails, naming the holder's
  // pid, while another process holds the same lock. Nothing to lock on a
  // database in memory.
  // A stage's, by the name it saves its snapshots under (or completes
  // checkpoints as).
  // `shared`: by the instances of a consumer group of pipelines (kpipe(7),
  // MANY INSTANCES), which the store's owners keep apart; a shared lock is
  // refused while a single pipeline holds it, and the other way round.
  Status lock_stage(std::string_view stage, bool shared = false);
  // kconsume's: one pipeline per state file, or any number of instances
  // of one consumer group (`shared`).
  Status lock_pipeline(bool shared = false);
  // A stage's lock as the store is kept: shared once a consumer group's
  // instance has registered or claimed a partition here (call it once the
  // stage's input has a first line: an instance's kconsume registers
  // before it writes). `pipeline`, the run of the instance's kconsume that
  // the instance line names, when there is one: then the stage's name is
  // also locked alone within that pipeline, so that two stages of one name
  // in one instance are refused (kpipe(7), MANY INSTANCES).
  Status lock_stage_as_kept(std::string_view stage, std::string_view pipeline = {});
  // Whether a live process (this one included) holds stage `stage`'s lock
  // within the instance pipeline `pipeline` (lock_stage_as_kept): whether
  // that stage of that instance still runs. Takes nothing.
  Expected<bool> stage_running(std::string_view stage, std::string_view pipeline);
  // The name an instance's kconsume gives its pipeline in its instance
  // line, and its stages lock their names within: this process's run of
  // the store (random), in hex.
  std::string pipeline_name() const;
  // The same lock for kcheckpoint reset and import, which rewrite the
  // offsets kconsume resumes from: refused while the pipeline runs.
  Status lock_offsets();

  // --- an instance's identity (kpipe(7), MANY INSTANCES) --------------------
  // Takes the instance name `name` for this process (kconsume's), held
  // until the store is closed or the process dies: a second live process
  // of that name is refused, naming the first's pid and host. `name`
  // empty: the first of HOST, HOST-2, HOST-3, ... that no live process
  // holds, so that the same command on the same machine is the same
  // instance after a restart. Records the instance (its group, pid, host
  // and run) and marks the store as kept by a consumer group's instances.
  // Returns the name taken.
  Expected<std::string> register_instance(std::string_view name, std::string_view group,
                                          Millis now);

  // --- checkpoints --------------------------------------------------------
  // The id for the next checkpoint: one more than any emitted so far, so
  // that ids grow across restarts.
  Expected<int64_t> next_checkpoint_id();
  // kconsume records each checkpoint it emits (not yet complete), with the
  // timestamps of the records it covers when it has them.
  Status record_emitted(int64_t id, Millis at, const std::optional<TimestampSummary>& ts = {});
  // The same for an instance of a consumer group of pipelines: the id is
  // the store's next, so that instances sharing the store never take one
  // id twice.
  Expected<int64_t> record_emitted(Millis at, const std::optional<TimestampSummary>& ts = {});
  // Checkpoint `id`'s end-to-end latency: nullopt when it is not complete
  // or its records' times are not known.
  Expected<std::optional<Latency>> latency(int64_t id);
  // The newest complete checkpoint with its records' times, and its
  // latency (klag --state).
  Expected<std::optional<CheckpointLatency>> latest_latency();
  // The newest complete checkpoint, if any.
  Expected<std::optional<int64_t>> latest_complete();
  // Who completed checkpoint `id` ("" when it is not complete, or gone).
  Expected<std::string> completed_by(int64_t id);
  // Marks `c` complete and stores its offsets as the pipeline's positions,
  // in one transaction. Completing an older id than the newest complete
  // one is refused as a protocol error. Offsets with an epoch (a consumer
  // group's instance) are each checked against the partition's owner: a
  // checkpoint of an instance that lost a partition is refused whole
  // (fenced), and ids grow per partition, not across the store.
  Status complete(const Checkpoint& c, std::string_view by, Millis now);
  // The same, inside a transaction the caller holds on db().
  Status complete_in_transaction(const Checkpoint& c, std::string_view by, Millis now);

  // The pipeline's positions: for each partition, the offset of the newest
  // complete checkpoint that held it, or one set by kcheckpoint.
  Expected<std::vector<StoredOffset>> offsets();
  // Sets positions by hand (kcheckpoint reset/import), in one transaction.
  Status set_offsets(const std::vector<PartitionOffset>& offsets, Millis now);

  Expected<std::vector<CheckpointRecord>> checkpoints();
  Expected<std::vector<SnapshotRecord>> snapshots();

  // --- many instances (kpipe(7), MANY INSTANCES) ----------------------------
  // Whether instances of a consumer group keep their state here by
  // partition (a partition was ever claimed).
  Expected<bool> owned_by_group();
  // Takes partitions over for this process: each one's epoch grows by one,
  // so that the store refuses what an older owner still writes for it;
  // the state its stages saved after its last complete checkpoint is
  // dropped (the records behind it will be read again) and history before
  // it pruned. One transaction.
  Expected<std::vector<PartitionClaim>> claim(std::vector<TopicPartition> partitions, Millis now);
  // kconsume's repair, before it claims partitions whose offsets a Kafka
  // transaction committed with checkpoint `c` but whose terminal stage
  // died before completing it here (kpipe(7), MANY INSTANCES): completes
  // `c` for its partitions (those the store has not seen complete past
  // it), whoever else holds the checkpoint's other partitions. One
  // transaction.
  Status complete_committed(const Checkpoint& c, std::string_view by, Millis now);
  // Inside the caller's transaction: refuses, naming the new owner, unless
  // every partition is still owned at its epoch. `what` names what was
  // refused ("checkpoint 41").
  Status check_owners(std::vector<PartitionOffset> owned, std::string_view what);

  // --- stage snapshots ----------------------------------------------------
  // Saves a stage's changes as its snapshot for `checkpoint`.
  Status save_snapshot(std::string_view stage, int64_t checkpoint, const StateChanges& changes,
                       Millis now);
  // Saves a stage's changes per partition (a consumer group's instance),
  // each checked against its owner's epoch, in one transaction.
  Status save_slices(std::string_view stage, int64_t checkpoint,
                     const std::vector<SliceChanges>& slices, Millis now);
  // Restores the stage's state as of the newest complete checkpoint: calls
  // `entry` for each live entry, drops snapshots saved after it and prunes
  // history before it. Returns the checkpoint restored (nullopt: none).
  // In a store kept by partition, only the entries of no partition, and
  // nothing is dropped: other instances are writing.
  Expected<std::optional<int64_t>> restore(std::string_view stage, Snapshottable& engine);
  // For a stage that saves no snapshots but whose options decide what it
  // wrote (kupsert's table, kproduce --transactional's topic): the stage's
  // live entry `key`, after saving `value` as it when there was none, as
  // of the first checkpoint. One transaction, so that of two processes
  // starting at once the second sees the first's.
  Expected<std::string> keep_entry(std::string_view stage, std::string_view key,
                                   std::string_view value);
  // One partition's entries, as of the checkpoint that last completed it
  // (claim() dropped what came after). Returns that checkpoint (nullopt:
  // no entries).
  Expected<std::optional<int64_t>> restore_slice(std::string_view stage,
                                                 const TopicPartition& partition,
                                                 Snapshottable& engine);

  // Integrity of the file and of the protocol's invariants; each problem
  // is one line. Beyond SQLite's own check: rows of kpipe's tables changed
  // by another program (their seals), offsets that disagree with the
  // checkpoint that stored them, and checkpoints written by two processes
  // of one role at once (two stages under one name, two pipelines on one
  // file), which each process's run record shows.
  Expected<std::vector<std::string>> verify();
  // For a state file that cannot be opened as one (a damaged file, say):
  // what SQLite's own check finds wrong in it, one line each (at most ten,
  // then how many more); empty when it finds nothing, or cannot look.
  static std::vector<std::string> check_file(const std::string& path);

 private:
  // The latency of checkpoint `id`, or of the newest that has one.
  Expected<std::optional<CheckpointLatency>> latency_of(std::optional<int64_t> id);
  StateStore(std::unique_ptr<Database> owned, Database* db);
  Status migrate();
  // open_existing's last step: the tables at this program's version.
  static Expected<std::unique_ptr<StateStore>> check_version(std::unique_ptr<Database> db);
  Status lock(const std::string& name, bool shared, StateLock::BusyMessage busy);
  Expected<bool> held(const std::string& name);
  // Refuses, naming the owner, unless `p` is still owned at `epoch`.
  Status check_owner(const TopicPartition& p, int64_t epoch, std::string_view what);
  // The newest complete checkpoint that held partition `p` (0: none).
  Expected<int64_t> last_completed(const TopicPartition& p);
  Expected<std::optional<int64_t>> restore_unowned(std::string_view stage, Snapshottable& engine);
  // Extends this process's record of the checkpoints it wrote as `role`
  // ("kconsume", "stage:NAME"), inside the caller's transaction.
  Status note_run(std::string_view role, int64_t checkpoint);
  enum class Stale { kUnchecked, kRefuse, kSkip };
  Status store_offsets(int64_t id, const std::vector<PartitionOffset>& offsets, Millis now,
                       Stale stale);
  // The upsert of a partition's position (the offsets table), and one run
  // of it: `checkpoint` 0 for a position set by hand.
  Expected<Statement> prepare_position();
  Status put_position(Statement& pos, const PartitionOffset& o, int64_t checkpoint, Millis now);
  // Released after the database is closed (members go in reverse order).
  std::vector<std::unique_ptr<StateLock>> locks_;
  bool session_locks_ = false;  // PostgreSQL's: held by the connection
  std::unique_ptr<Database> owned_;
  Database* db_;
  int64_t run_;  // this store's run: random, so that no two processes share one
};

}  // namespace kpipe
