// What a stateful engine (kdedup, kwindow) gives the checkpoint protocol:
// its state as key/value entries, and at each checkpoint only the entries
// that changed since the previous one, so that snapshots are incremental.
// Pure: the state store (state_store.h) keeps the entries in SQLite.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kpipe/partition.h"
#include "kpipe/status.h"

namespace kpipe {

struct StateChanges {
  // Entries added or changed since the previous take_changes().
  std::vector<std::pair<std::string, std::string>> put;
  // Keys removed since then (expired, evicted, fired and freed).
  std::vector<std::string> removed;

  void clear() {
    put.clear();
    removed.clear();
  }
  bool empty() const { return put.empty() && removed.empty(); }
};

// One partition's share of a stage's changes at a checkpoint, when the
// pipeline is an instance of a consumer group (kpipe(7), MANY INSTANCES):
// saved only while the partition's owner is still at `epoch`.
struct SliceChanges {
  TopicPartition partition;
  int64_t epoch = 0;
  const StateChanges* changes = nullptr;
};

class Snapshottable {
 public:
  virtual ~Snapshottable() = default;
  // Appends what changed since the previous call (or since restore), and
  // forgets it. A key both put and removed since then appears once, as
  // whichever happened last.
  virtual void take_changes(StateChanges& out) = 0;
  // Restore: called once per entry of the snapshot, in no particular
  // order, on an empty engine; then finish_restore().
  virtual Status restore_entry(std::string_view key, std::string_view value) = 0;
  virtual Status finish_restore() { return {}; }
};

}  // namespace kpipe
