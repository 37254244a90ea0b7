#include "kpipe/programs/state_file.h"

#include <utility>

#include "kpipe/store/state_store.h"

namespace kpipe {

namespace {

class StateFileSnapshots final : public SnapshotStore {
 public:
  explicit StateFileSnapshots(std::unique_ptr<StateStore> store) : store_(std::move(store)) {}

  Status save_snapshot(std::string_view stage, int64_t checkpoint, const StateChanges& changes,
                       Millis now) override {
    return store_->save_snapshot(stage, checkpoint, changes, now);
  }

  Expected<std::optional<int64_t>> restore(std::string_view stage, Snapshottable& engine) override {
    return store_->restore(stage, engine);
  }

 private:
  std::unique_ptr<StateStore> store_;
};

}  // namespace

Expected<std::unique_ptr<SnapshotStore>> open_state_file(const std::string& path,
                                                         const std::string& stage) {
  if (path.empty()) return std::unique_ptr<SnapshotStore>();
  auto opened = StateStore::open(path);
  if (!opened) return opened.take_error();
  // Before anything is restored: restoring drops the snapshots a running
  // stage of the same name saved for checkpoints not yet complete.
  KPIPE_TRY((*opened)->lock_stage(stage));
  return std::unique_ptr<SnapshotStore>(std::make_unique<StateFileSnapshots>(std::move(*opened)));
}

}  // namespace kpipe
