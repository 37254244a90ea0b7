#include "kpipe/programs/stage_state.h"

#include <utility>

#include "kpipe/store/key_samples.h"
#include "kpipe/store/state_store.h"

namespace kpipe {

namespace {

class StateFileSnapshots final : public SnapshotStore {
 public:
  explicit StateFileSnapshots(std::unique_ptr<StateStore> store)
      : store_(std::move(store)), samples_(store_->db()) {}

  Status save_snapshot(std::string_view stage, int64_t checkpoint, const StateChanges& changes,
                       Millis now) override {
    return store_->save_snapshot(stage, checkpoint, changes, now);
  }

  // The stage's lock comes first: restoring drops the snapshots a running
  // stage of the same name saved for checkpoints not yet complete. Stages
  // restore once their input has a first line, after an instance's
  // kconsume claimed its partitions: the lock is then a shared one.
  Expected<std::optional<int64_t>> restore(std::string_view stage, Snapshottable& engine) override {
    KPIPE_TRY(store_->lock_stage_as_kept(stage, pipeline_));
    return store_->restore(stage, engine);
  }

  void set_pipeline(std::string_view pipeline) override { pipeline_ = pipeline; }

  Status save_slices(std::string_view stage, int64_t checkpoint,
                     const std::vector<SliceChanges>& slices, Millis now) override {
    return store_->save_slices(stage, checkpoint, slices, now);
  }

  Expected<std::optional<int64_t>> restore_slice(std::string_view stage,
                                                 const TopicPartition& partition,
                                                 Snapshottable& engine) override {
    return store_->restore_slice(stage, partition, engine);
  }

  // Right after the slices' transaction, in one of its own: the samples
  // are a check, not state, and a fenced save never gets here.
  Expected<std::optional<KeySplit>> record_key_samples(
      std::string_view stage, int64_t checkpoint, const std::vector<KeySample>& samples,
      const std::vector<std::string>& topics) override {
    return samples_.record(stage, samples, topics, checkpoint);
  }

 private:
  std::unique_ptr<StateStore> store_;
  KeySamples samples_;
  std::string pipeline_;
};

}  // namespace

Expected<std::unique_ptr<SnapshotStore>> open_stage_state(const std::string& path) {
  if (path.empty()) return std::unique_ptr<SnapshotStore>();
  auto opened = StateStore::open(path);
  if (!opened) return opened.take_error();
  return std::unique_ptr<SnapshotStore>(std::make_unique<StateFileSnapshots>(std::move(*opened)));
}

Status await_input(SnapshotStore* store, const InputOptions& input, const std::atomic<bool>* stop) {
  if (store == nullptr) return {};
  auto instance = await_instance(input, stop);
  if (!instance) return instance.take_error();
  if (*instance) store->set_pipeline((*instance)->pipeline);
  return {};
}

Status keep_stage_options(StateStore& store, std::string_view stage,
                          const std::vector<std::string>& options, std::string_view remedy) {
  auto kept = store.keep_entry(stage, kStateOptionsKey, encode_state_options(options));
  if (!kept) return kept.take_error();
  auto saved = decode_state_options(*kept);
  if (!saved) return failure("the saved state of '{}' has a malformed options entry", stage);
  return check_state_options(stage, *saved, options, remedy);
}

Status meter_completed(StateStore& store, CheckpointMeter& meter, const Checkpoint& c, Millis now) {
  auto latency = store.latency(c.id);
  if (!latency) return latency.take_error();
  meter.passed(c, now, *latency);
  return {};
}

}  // namespace kpipe
