#include "kpipe/stage/stateful.h"

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fakes.h"
#include "helpers.h"

// The stateful-stage core: restore at start, a snapshot at each checkpoint
// line, the format marker, and the keys of records; with a fake store and
// a fake engine.

namespace kpipe {
namespace {

constexpr Millis kNow = 1795947330123;

// The state store's contract in memory: one map of live entries per stage;
// a restore that fails changes nothing.
class FakeStore final : public SnapshotStore {
 public:
  Status save_snapshot(std::string_view stage, int64_t checkpoint, const StateChanges& changes,
                       Millis now) override {
    auto& live = stages[std::string(stage)];
    for (const auto& key : changes.removed) live.erase(key);
    for (const auto& [key, value] : changes.put) live[key] = value;
    saves.push_back({std::string(stage), checkpoint, now, changes.put, changes.removed});
    latest = checkpoint;
    return {};
  }

  Expected<std::optional<int64_t>> restore(std::string_view stage, Snapshottable& engine) override {
    ++restores;
    for (const auto& [key, value] : stages[std::string(stage)])
      KPIPE_TRY(engine.restore_entry(key, value));
    KPIPE_TRY(engine.finish_restore());
    return latest;
  }

  // Each partition's entries as a stage of their own, "STAGE@TOPIC/P";
  // an epoch other than `owners` holds is refused, as the store's fencing.
  Status save_slices(std::string_view stage, int64_t checkpoint,
                     const std::vector<SliceChanges>& slices, Millis now) override {
    for (const auto& slice : slices) {
      auto owner = owners.find(slice.partition);
      if (owner != owners.end() && owner->second != slice.epoch)
        return failure("fenced: {} [{}]", slice.partition.topic, slice.partition.partition);
    }
    for (const auto& slice : slices)
      KPIPE_TRY(save_snapshot(slice_name(stage, slice.partition), checkpoint, *slice.changes, now));
    return {};
  }

  Expected<std::optional<int64_t>> restore_slice(std::string_view stage,
                                                 const TopicPartition& partition,
                                                 Snapshottable& engine) override {
    auto& live = stages[slice_name(stage, partition)];
    for (const auto& [key, value] : live) KPIPE_TRY(engine.restore_entry(key, value));
    KPIPE_TRY(engine.finish_restore());
    if (live.empty()) return std::optional<int64_t>{};
    return latest;
  }

  // The store's co-partition check, in memory: a sample's hash recorded
  // under another partition of `topics` is a split.
  Expected<std::optional<KeySplit>> record_key_samples(
      std::string_view stage, int64_t checkpoint, const std::vector<KeySample>& samples,
      const std::vector<std::string>& topics) override {
    sampled.push_back({std::string(stage), checkpoint, samples, topics});
    std::optional<KeySplit> split;
    for (const KeySample& s : samples) {
      auto [it, added] = recorded.emplace(s.hash, s.partition);
      if (!added && it->second != s.partition && !split)
        split = KeySplit{s.key, it->second, s.partition};
    }
    return split;
  }

  static std::string slice_name(std::string_view stage, const TopicPartition& p) {
    return fmt::format("{}@{}/{}", stage, p.topic, p.partition);
  }

  std::map<TopicPartition, int64_t> owners;

  struct Save {
    std::string stage;
    int64_t checkpoint;
    Millis at;
    std::vector<std::pair<std::string, std::string>> put;
    std::vector<std::string> removed;
  };
  std::map<std::string, std::map<std::string, std::string>> stages;
  std::vector<Save> saves;
  std::optional<int64_t> latest;
  int restores = 0;
  struct Sampled {
    std::string stage;
    int64_t checkpoint;
    std::vector<KeySample> samples;
    std::vector<std::string> topics;
  };
  std::vector<Sampled> sampled;
  std::map<uint64_t, TopicPartition> recorded;
};

// Entries set by hand; take_changes hands out what was set since.
class FakeEngine final : public Snapshottable {
 public:
  void set(const std::string& key, const std::string& value) {
    pending.put.emplace_back(key, value);
  }
  void take_changes(StateChanges& out) override {
    out.put.insert(out.put.end(), pending.put.begin(), pending.put.end());
    pending.clear();
  }
  Status restore_entry(std::string_view key, std::string_view value) override {
    restored[std::string(key)] = std::string(value);
    return {};
  }
  Status finish_restore() override {
    ++finished;
    return {};
  }

  StateChanges pending;
  std::map<std::string, std::string> restored;
  int finished = 0;
};

Line control(std::string_view text, uint64_t number = 1) {
  Line line;
  line.text = text;
  line.number = number;
  line.input = "<stdin>";
  return line;
}

const std::string kCheckpoint7 = R"({"$kpipe":"checkpoint","id":7,"at":5,"offsets":[]})";
const std::string kCheckpoint8 = R"({"$kpipe":"checkpoint","id":8,"at":6,"offsets":[]})";

TEST_CASE("stage state: without a store, nothing is restored or saved", "[stateful]") {
  FakeEngine engine;
  FakeClock clock(kNow);
  StageState state(nullptr, "kdedup", engine, clock);
  CHECK_FALSE(state.enabled());
  auto restored = state.restore();
  REQUIRE(restored.ok());
  CHECK_FALSE(restored->has_value());
  CHECK(engine.finished == 0);
  // Checkpoint lines are not read: a malformed one passes as any other.
  test::Padded bad(R"({"$kpipe":"checkpoint","id":"x"})");
  CHECK(state.on_control(control(bad)).ok());
}

TEST_CASE("stage state: a checkpoint line saves what changed since the last", "[stateful]") {
  FakeStore store;
  FakeEngine engine;
  FakeClock clock(kNow);
  StageState state(&store, "kwindow/w", engine, clock);
  CHECK(state.enabled());
  CHECK(state.stage() == "kwindow/w");
  REQUIRE(state.restore().ok());

  engine.set("a", "1");
  engine.set("b", "2");
  test::Padded c7(kCheckpoint7), c8(kCheckpoint8);
  REQUIRE(state.on_control(control(c7)).ok());
  clock.advance(1000);
  engine.set("a", "3");
  REQUIRE(state.on_control(control(c8)).ok());
  REQUIRE(store.saves.size() == 2);
  CHECK(store.saves[0].stage == "kwindow/w");
  CHECK(store.saves[0].checkpoint == 7);
  CHECK(store.saves[0].at == kNow);
  CHECK(store.saves[0].put ==
        std::vector<std::pair<std::string, std::string>>{{"a", "1"}, {"b", "2"}});
  CHECK(store.saves[1].checkpoint == 8);
  CHECK(store.saves[1].at == kNow + 1000);
  CHECK(store.saves[1].put == std::vector<std::pair<std::string, std::string>>{{"a", "3"}});

  // Other control lines save nothing.
  test::Padded other(R"({"$kpipe":"partitions","event":"assigned","partitions":[]})");
  REQUIRE(state.on_control(control(other)).ok());
  CHECK(store.saves.size() == 2);
}

TEST_CASE("stage state: a malformed checkpoint line is bad input that names its line",
          "[stateful]") {
  FakeStore store;
  FakeEngine engine;
  FakeClock clock(kNow);
  StageState state(&store, "kdedup", engine, clock);
  test::Padded bad(R"({"$kpipe":"checkpoint","id":"x"})");
  Status s = state.on_control(control(bad, 4));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kDataError);
  CHECK(s.error().message ==
        "<stdin>: line 4: checkpoint line: 'id' must be a non-negative integer");
  CHECK(store.saves.empty());
}

TEST_CASE("stage state: restore hands the engine its stage's entries", "[stateful]") {
  FakeStore store;
  store.stages["kdedup"] = {{"m", "meta"}, {"k", "v"}};
  store.stages["kdedup/other"] = {{"z", "z"}};
  store.latest = 3;
  FakeEngine engine;
  FakeClock clock(kNow);
  StageState state(&store, "kdedup", engine, clock);
  auto restored = state.restore();
  REQUIRE(restored.ok());
  CHECK(*restored == std::optional<int64_t>(3));
  CHECK(engine.restored == std::map<std::string, std::string>{{"m", "meta"}, {"k", "v"}});
  CHECK(engine.finished == 1);
}

TEST_CASE("stage state: the format marker is saved once and kept from the engine", "[stateful]") {
  FakeStore store;
  FakeClock clock(kNow);
  test::Padded c7(kCheckpoint7), c8(kCheckpoint8);
  {
    FakeEngine engine;
    StageState state(&store, "kdedup", engine, clock, StateFormat{"kdedup/2", "", {}});
    REQUIRE(state.restore().ok());
    engine.set("k", "v");
    REQUIRE(state.on_control(control(c7)).ok());
    REQUIRE(state.on_control(control(c8)).ok());
    REQUIRE(store.saves.size() == 2);
    CHECK(store.saves[0].put ==
          std::vector<std::pair<std::string, std::string>>{{"k", "v"}, {"!format", "kdedup/2"}});
    CHECK(store.saves[1].put.empty());
  }
  // The next run finds it: the engine never sees it, and it is not saved
  // again.
  FakeEngine engine;
  StageState state(&store, "kdedup", engine, clock, StateFormat{"kdedup/2", "never", {}});
  REQUIRE(state.restore().ok());
  CHECK(engine.restored == std::map<std::string, std::string>{{"k", "v"}});
  REQUIRE(state.on_control(control(c8)).ok());
  CHECK(store.saves.back().put.empty());
}

TEST_CASE("stage state: a state saved before the marker is refused when it must be", "[stateful]") {
  FakeClock clock(kNow);
  FakeStore store;
  store.stages["kdedup"] = {{"m", "meta"}};
  store.latest = 2;

  // Accepted where the entries still mean the same, and marked from the
  // next snapshot on.
  {
    FakeEngine engine;
    StageState state(&store, "kdedup", engine, clock, StateFormat{"kdedup/2", "", {}});
    REQUIRE(state.restore().ok());
    CHECK(engine.finished == 1);
  }

  FakeEngine engine;
  StageState state(&store, "kdedup", engine, clock,
                   StateFormat{"kdedup/2", "holds keys of another kind", {}});
  auto refused = state.restore();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().status == ExitStatus::kFailure);
  CHECK(
      refused.error().message ==
      "the saved state of 'kdedup' holds keys of another kind: give another --name or state file");
  CHECK(engine.finished == 0);

  // A stage with no saved state has nothing to refuse.
  FakeEngine fresh;
  StageState other(&store, "kdedup/fresh", fresh, clock,
                   StateFormat{"kdedup/2", "holds keys of another kind", {}});
  REQUIRE(other.restore().ok());
}

TEST_CASE("stage state: a state of another format is refused", "[stateful]") {
  FakeClock clock(kNow);
  FakeStore store;
  store.stages["kdedup"] = {{"!format", "kdedup/3"}, {"m", "meta"}};
  FakeEngine engine;
  StageState state(&store, "kdedup", engine, clock, StateFormat{"kdedup/2", "", {}});
  auto refused = state.restore();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message ==
        "the saved state of 'kdedup' is of format 'kdedup/3', which this stage does not read: give "
        "another --name or state file");

  // A stage that keeps no marker refuses one too.
  FakeEngine plain;
  StageState unmarked(&store, "kdedup", plain, clock);
  REQUIRE_FALSE(unmarked.restore().ok());
}

TEST_CASE("stage state: the options are saved once, beside the marker", "[stateful]") {
  FakeStore store;
  FakeClock clock(kNow);
  test::Padded c7(kCheckpoint7), c8(kCheckpoint8);
  StateFormat format{"kdedup/2", "", {"--key .id", "no --within"}};
  {
    FakeEngine engine;
    StageState state(&store, "kdedup", engine, clock, format);
    REQUIRE(state.restore().ok());
    engine.set("k", "v");
    REQUIRE(state.on_control(control(c7)).ok());
    REQUIRE(state.on_control(control(c8)).ok());
    CHECK(store.saves[0].put ==
          std::vector<std::pair<std::string, std::string>>{
              {"k", "v"}, {"!format", "kdedup/2"}, {"!options", R"(["--key .id","no --within"])"}});
    CHECK(store.saves[1].put.empty());
  }
  // The same options restore; the engine never sees them, and they are not
  // saved again.
  FakeEngine engine;
  StageState state(&store, "kdedup", engine, clock, format);
  REQUIRE(state.restore().ok());
  CHECK(engine.restored == std::map<std::string, std::string>{{"k", "v"}});
  REQUIRE(state.on_control(control(c8)).ok());
  CHECK(store.saves.back().put.empty());
}

TEST_CASE("stage state: a state saved with other options is refused, naming those that differ",
          "[stateful]") {
  FakeClock clock(kNow);
  FakeStore store;
  store.stages["kdedup"] = {
      {"!format", "kdedup/2"}, {"!options", R"(["--key .id","no --within"])"}, {"m", "meta"}};
  auto refusal = [&](std::vector<std::string> options) {
    FakeEngine engine;
    StageState state(&store, "kdedup", engine, clock, StateFormat{"kdedup/2", "", options});
    auto restored = state.restore();
    REQUIRE_FALSE(restored.ok());
    CHECK(restored.error().status == ExitStatus::kFailure);
    CHECK(engine.finished == 0);
    return restored.error().message;
  };
  CHECK(refusal({"--key .user_id", "no --within"}) ==
        "the saved state of 'kdedup' was made with --key .id, not --key .user_id: give another "
        "--name or state file");
  CHECK(refusal({"--key .u --key .d", "--within without --time"}) ==
        "the saved state of 'kdedup' was made with --key .id and no --within, not --key .u --key "
        ".d and --within without --time: give another --name or state file");
  CHECK(refusal({"--key .id"}) ==
        "the saved state of 'kdedup' was made with --key .id and no --within, not --key .id: give "
        "another --name or state file");

  // A stage that keeps no options does not look at them.
  FakeEngine plain;
  StageState unrecorded(&store, "kdedup", plain, clock, StateFormat{"kdedup/2", "", {}});
  REQUIRE(unrecorded.restore().ok());

  store.stages["kdedup"]["!options"] = "not json";
  FakeEngine engine;
  StageState state(&store, "kdedup", engine, clock, StateFormat{"kdedup/2", "", {"--key .id"}});
  auto malformed = state.restore();
  REQUIRE_FALSE(malformed.ok());
  CHECK(malformed.error().message == "the saved state of 'kdedup' has a malformed options entry");
}

TEST_CASE("stage state: a state saved before its options were kept is restored, then gets them",
          "[stateful]") {
  FakeClock clock(kNow);
  FakeStore store;
  store.stages["kdedup"] = {{"!format", "kdedup/2"}, {"m", "meta"}};
  store.latest = 2;
  FakeEngine engine;
  StageState state(&store, "kdedup", engine, clock,
                   StateFormat{"kdedup/2", "", {"--key .id", "no --within"}});
  REQUIRE(state.restore().ok());
  CHECK(engine.finished == 1);
  test::Padded c7(kCheckpoint7);
  REQUIRE(state.on_control(control(c7)).ok());
  CHECK(store.saves.back().put == std::vector<std::pair<std::string, std::string>>{
                                      {"!options", R"(["--key .id","no --within"])"}});
}

// --- an instance of a consumer group (kpipe(7), MANY INSTANCES) -------------

const std::string kAssigned01 =
    R"({"$kpipe":"partitions","event":"assigned","partitions":[)"
    R"({"topic":"events","partition":0,"epoch":3},{"topic":"events","partition":1,"epoch":3}]})";

// A stage state whose partitions' engines are FakeEngines, kept in the
// order they were made, with what on_restored and on_dropped were told.
struct Instance {
  explicit Instance(FakeStore& store, StateFormat format = {})
      : state(&store, "kdedup", single, clock, std::move(format), [this] {
          auto e = std::make_unique<FakeEngine>();
          made.push_back(e.get());
          return e;
        }) {
    state.on_restored = [this](const TopicPartition& p, Snapshottable& e,
                               std::optional<int64_t> checkpoint) {
      restored.emplace_back(p, checkpoint);
      restored_engines.push_back(&e);
    };
    state.on_dropped = [this](const TopicPartition& p, Snapshottable&) { dropped.push_back(p); };
  }
  FakeEngine* engine(int32_t partition) {
    return static_cast<FakeEngine*>(state.engine_for("events", partition));
  }
  Status line(const std::string& text, uint64_t number = 1) {
    test::Padded padded(text);
    return state.on_control(control(padded, number));
  }

  FakeEngine single;
  FakeClock clock{kNow};
  std::vector<FakeEngine*> made;
  std::vector<std::pair<TopicPartition, std::optional<int64_t>>> restored;
  std::vector<Snapshottable*> restored_engines;
  std::vector<TopicPartition> dropped;
  StageState state;
};

TEST_CASE("stage state: an owned assigned line makes and restores an engine per partition",
          "[stateful]") {
  FakeStore store;
  store.stages["kdedup@events/0"] = {{"k0", "v0"}};
  store.stages["kdedup"] = {{"single", "never restored here"}};
  store.latest = 4;
  Instance in(store);
  CHECK_FALSE(in.state.sliced());
  CHECK(in.state.engine_for("events", 0) == nullptr);

  REQUIRE(in.line(kAssigned01).ok());
  CHECK(in.state.sliced());
  REQUIRE(in.made.size() == 2);
  REQUIRE(in.engine(0) != nullptr);
  REQUIRE(in.engine(1) != nullptr);
  CHECK(in.engine(0) != in.engine(1));
  // Each engine gets its own partition's entries, and finishes restoring.
  CHECK(in.engine(0)->restored == std::map<std::string, std::string>{{"k0", "v0"}});
  CHECK(in.engine(0)->finished == 1);
  CHECK(in.engine(1)->restored.empty());
  CHECK(in.engine(1)->finished == 1);
  CHECK(in.restored == std::vector<std::pair<TopicPartition, std::optional<int64_t>>>{
                           {{"events", 0}, 4}, {{"events", 1}, std::nullopt}});
  CHECK(in.restored_engines == std::vector<Snapshottable*>{in.engine(0), in.engine(1)});
  // Partitions not owned have no engine, and the single pipeline's engine
  // is left alone.
  CHECK(in.state.engine_for("events", 2) == nullptr);
  CHECK(in.state.engine_for("other", 0) == nullptr);
  CHECK(in.single.restored.empty());
  CHECK(in.single.finished == 0);
  CHECK(store.restores == 0);
  int slices = 0;
  in.state.for_each_slice([&](const TopicPartition&, Snapshottable&) { ++slices; });
  CHECK(slices == 2);
}

TEST_CASE("stage state: a checkpoint saves each partition under its epoch, the line's winning",
          "[stateful]") {
  FakeStore store;
  // Partition 0's saved state has the marker already: it is not saved again.
  store.stages["kdedup@events/0"] = {{"!format", "kdedup/2"}, {"k0", "v0"}};
  Instance in(store, StateFormat{"kdedup/2", "", {"--key .id"}});
  REQUIRE(in.line(kAssigned01).ok());
  CHECK(in.engine(0)->restored == std::map<std::string, std::string>{{"k0", "v0"}});
  in.engine(0)->set("a", "1");
  in.engine(1)->set("b", "2");
  in.single.set("never", "saved");
  // kconsume's checkpoint line says partition 1 is at epoch 4 (the
  // assigned line said 3): the store's owners agree with the checkpoint.
  store.owners = {{{"events", 0}, 3}, {{"events", 1}, 4}};
  REQUIRE(in.line(R"({"$kpipe":"checkpoint","id":7,"at":5,"offsets":[)"
                  R"({"topic":"events","partition":0,"offset":1,"epoch":3},)"
                  R"({"topic":"events","partition":1,"offset":1,"epoch":4}]})")
              .ok());
  using Puts = std::vector<std::pair<std::string, std::string>>;
  REQUIRE(store.saves.size() == 2);
  CHECK(store.saves[0].stage == "kdedup@events/0");
  CHECK(store.saves[0].checkpoint == 7);
  CHECK(store.saves[0].at == kNow);
  CHECK(store.saves[0].put == Puts{{"a", "1"}, {"!options", R"(["--key .id"])"}});
  CHECK(store.saves[1].stage == "kdedup@events/1");
  CHECK(store.saves[1].put ==
        Puts{{"b", "2"}, {"!format", "kdedup/2"}, {"!options", R"(["--key .id"])"}});
  CHECK(store.stages["kdedup"].empty());

  // The next checkpoint, with no epochs on its line, keeps the epochs the
  // last one set; the format is saved once per partition.
  in.engine(1)->set("c", "3");
  REQUIRE(in.line(kCheckpoint8).ok());
  REQUIRE(store.saves.size() == 4);
  CHECK(store.saves[2].put.empty());
  CHECK(store.saves[3].put == Puts{{"c", "3"}});
  CHECK(in.single.pending.put.size() == 1);  // the single engine's changes are not taken
}

TEST_CASE("stage state: a fenced save fails the checkpoint line", "[stateful]") {
  FakeStore store;
  Instance in(store);
  REQUIRE(in.line(kAssigned01).ok());
  in.engine(0)->set("a", "1");
  // Another instance took partition 1 over (epoch 5).
  store.owners = {{{"events", 0}, 3}, {{"events", 1}, 5}};
  Status s = in.line(kCheckpoint7);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message.find("fenced") != std::string::npos);
  CHECK(store.saves.empty());
}

TEST_CASE("stage state: a revoked line drops its partitions' engines", "[stateful]") {
  FakeStore store;
  Instance in(store);
  REQUIRE(in.line(kAssigned01).ok());
  FakeEngine* zero = in.engine(0);
  in.engine(1)->set("b", "2");
  REQUIRE(in.line(kCheckpoint7).ok());
  REQUIRE(in.line(R"({"$kpipe":"partitions","event":"revoked","partitions":[)"
                  R"({"topic":"events","partition":1},{"topic":"events","partition":7}]})")
              .ok());
  // Partition 7 was never this instance's: nothing to drop.
  CHECK(in.dropped == std::vector<TopicPartition>{{"events", 1}});
  CHECK(in.state.engine_for("events", 1) == nullptr);
  CHECK(in.engine(0) == zero);
  CHECK(in.state.sliced());
  zero->set("a", "1");
  REQUIRE(in.line(kCheckpoint8).ok());
  REQUIRE(store.saves.size() == 3);
  CHECK(store.saves[2].stage == "kdedup@events/0");
  CHECK(store.saves[2].checkpoint == 8);

  // Assigned again later: a new engine, restored from what was saved.
  REQUIRE(in.line(R"({"$kpipe":"partitions","event":"assigned","partitions":[)"
                  R"({"topic":"events","partition":1,"epoch":6}]})")
              .ok());
  REQUIRE(in.engine(1) != nullptr);
  CHECK(in.made.size() == 3);
  CHECK(in.engine(1) == in.made.back());
  CHECK(in.engine(1)->restored == std::map<std::string, std::string>{{"b", "2"}});
}

TEST_CASE("stage state: partitions assigned without epochs once owned are bad input",
          "[stateful]") {
  FakeStore store;
  Instance in(store);
  // Before any owned line, an announcement of a single pipeline changes
  // nothing.
  REQUIRE(in.line(R"({"$kpipe":"partitions","event":"assigned","partitions":[)"
                  R"({"topic":"events","partition":0}]})")
              .ok());
  CHECK_FALSE(in.state.sliced());
  CHECK(in.made.empty());

  REQUIRE(in.line(kAssigned01).ok());
  Status s = in.line(R"({"$kpipe":"partitions","event":"assigned","partitions":[)"
                     R"({"topic":"events","partition":2}]})",
                     9);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kDataError);
  CHECK(s.error().message ==
        "<stdin>: line 9: partitions assigned without an epoch in a pipeline whose partitions are "
        "owned: one kconsume per pipeline");
  // An assignment of no partitions claims nothing: no conflict.
  CHECK(in.line(R"({"$kpipe":"partitions","event":"assigned","partitions":[]})").ok());
  CHECK(in.made.size() == 2);

  // A malformed partitions line names its line.
  Status mixed = in.line(R"({"$kpipe":"partitions","event":"assigned","partitions":[)"
                         R"({"topic":"events","partition":2,"epoch":1},)"
                         R"({"topic":"events","partition":3}]})",
                         10);
  REQUIRE_FALSE(mixed.ok());
  CHECK(mixed.error().status == ExitStatus::kDataError);
  CHECK(mixed.error().message ==
        "<stdin>: line 10: partitions line: either every partition has an 'epoch' or none");
}

TEST_CASE("stage state: a stage that cannot make engines refuses an owned assigned line",
          "[stateful]") {
  FakeStore store;
  FakeEngine engine;
  FakeClock clock(kNow);
  StageState state(&store, "kjoin", engine, clock);
  test::Padded assigned(kAssigned01);
  Status s = state.on_control(control(assigned));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kFailure);
  CHECK(s.error().message.starts_with(
      "stage 'kjoin' cannot keep its state per partition, as an instance of a consumer group "
      "sharing its state database does"));
  CHECK_FALSE(state.sliced());
}

TEST_CASE("copartition_warning: names the key, both partitions and the fix", "[stateful]") {
  CHECK(copartition_warning(R"("a")", {"events", 0}, {"events", 1}, "duplicates pass",
                            {".value.id", ".region"}) ==
        R"(key "a" came from partitions events [0] and events [1]: duplicates pass; re-key the )"
        "topic by it first: kconsume -t events --format value | kproduce -t events-rekeyed -k .id "
        "-k .region (kpipe(7), MANY INSTANCES)");
  // Without --key paths the fix names none; a long key is cut short.
  std::string warning = copartition_warning(std::string(300, 'k'), {"a", 2}, {"b", 3}, "so", {});
  CHECK(warning.starts_with("key " + std::string(200, 'k') +
                            "... came from partitions a [2] and b [3]: so; "));
  CHECK(warning.find("kproduce -t b-rekeyed -k PATH (") != std::string::npos);
}

// --- keys ------------------------------------------------------------------

// The key of `line` at the paths `paths`.
class KeyOf {
 public:
  explicit KeyOf(std::vector<std::string> paths) {
    for (const std::string& p : paths) slots_.push_back(fields_.add(FieldPath::parse(p).value()));
  }
  Expected<std::string> operator()(const std::string& line) {
    padded_ = std::make_unique<test::Padded>(line);
    REQUIRE(reader_.read(padded_->view(), fields_, values_).ok());
    auto key = encode_key(fields_, slots_, values_.data(), buffer_);
    if (!key) return key.take_error();
    // One plain value is a view into the line itself.
    viewed_line = key->data() >= padded_->view().data() &&
                  key->data() < padded_->view().data() + padded_->view().size();
    return std::string(*key);
  }
  bool viewed_line = false;

 private:
  FieldSet fields_;
  std::vector<size_t> slots_;
  JsonReader reader_;
  std::vector<JsonField> values_;
  std::string buffer_;
  std::unique_ptr<test::Padded> padded_;
};

TEST_CASE("encode_key: one path is its value's JSON text", "[stateful]") {
  KeyOf key({".k"});
  CHECK(*key(R"({"k":"a"})") == R"("a")");
  CHECK(key.viewed_line);
  CHECK(*key(R"({"k": 1.50})") == "1.50");
  CHECK(key.viewed_line);
  CHECK(*key(R"({"k":null})") == "null");
  // Equal values written alike share a key.
  CHECK(*key(R"({"k":"\u0061"})") == R"("a")");
  CHECK_FALSE(key.viewed_line);
  CHECK(*key(R"({"k":"tab\there"})") == R"("tab\there")");
  CHECK(*key(R"({"k":{"x": [1, 2]}})") == R"({"x":[1,2]})");
  CHECK(*key(R"({"k":[ "a" ,1 ]})") == R"(["a",1])");
}

TEST_CASE("encode_key: several paths make a JSON array", "[stateful]") {
  KeyOf key({".u", ".d"});
  CHECK(*key(R"({"u":"a","d":1})") == R"(["a",1])");
  CHECK(*key(R"({"d":1,"u":"\u0061"})") == R"(["a",1])");
  // Kept apart: 1 and 23 are not 12 and 3.
  CHECK(*key(R"({"u":1,"d":23})") == "[1,23]");
  CHECK(*key(R"({"u":12,"d":3})") == "[12,3]");
  CHECK(*key(R"({"u":{"x": [1, 2]},"d":null})") == R"([{"x":[1,2]},null])");
  CHECK(*key(R"({"u":"a,b","d":"c"})") == R"(["a,b","c"])");
}

TEST_CASE("encode_key: a missing path is bad input that names it", "[stateful]") {
  KeyOf key({".u", "/d"});
  auto missing = key(R"({"u":"a"})");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().status == ExitStatus::kDataError);
  CHECK(missing.error().message == "field '/d' is missing");
}

}  // namespace
}  // namespace kpipe

namespace kpipe {
namespace {

// The keys a record of `partition` offers: engine_for() first, as a stage
// finds the record's engine.
void offer(StageState& state, int32_t partition, uint64_t hash, std::string_view key) {
  REQUIRE(state.engine_for("events", partition) != nullptr);
  state.sample_key(hash, key);
}

TEST_CASE("stage state: a checkpoint hands the store each partition's sampled keys",
          "[stateful][copartition]") {
  FakeStore store;
  Instance in(store);
  REQUIRE(in.line(kAssigned01).ok());
  offer(in.state, 0, 5, "\"u5\"");
  offer(in.state, 0, 5, "\"u5\"");  // once
  offer(in.state, 1, 9, "\"u9\"");
  REQUIRE(in.line(kCheckpoint7).ok());
  REQUIRE(store.sampled.size() == 1);
  const auto& sampled = store.sampled[0];
  CHECK(sampled.stage == "kdedup");
  CHECK(sampled.checkpoint == 7);
  CHECK(sampled.topics == std::vector<std::string>{"events"});
  REQUIRE(sampled.samples.size() == 2);
  CHECK(sampled.samples[0].partition == TopicPartition{"events", 0});
  CHECK(sampled.samples[0].hash == 5);
  CHECK(sampled.samples[0].key == "\"u5\"");
  CHECK(sampled.samples[1].partition == TopicPartition{"events", 1});
  // Nothing new: nothing to ask.
  offer(in.state, 0, 5, "\"u5\"");
  REQUIRE(in.line(kCheckpoint8).ok());
  CHECK(store.sampled.size() == 1);
}

TEST_CASE("stage state: a key the store holds under another partition is told once",
          "[stateful][copartition]") {
  FakeStore store;
  // Another instance recorded u5 under partition 3.
  store.recorded.emplace(5, TopicPartition{"events", 3});
  Instance in(store);
  std::vector<KeySplit> splits;
  in.state.on_key_split = [&](const KeySplit& s) { splits.push_back(s); };
  REQUIRE(in.line(kAssigned01).ok());
  offer(in.state, 1, 5, "\"u5\"");
  REQUIRE(in.line(kCheckpoint7).ok());
  REQUIRE(splits.size() == 1);
  CHECK(splits[0].key == "\"u5\"");
  CHECK(splits[0].recorded == TopicPartition{"events", 3});
  CHECK(splits[0].seen == TopicPartition{"events", 1});
  // Another split later is not told again.
  offer(in.state, 0, 9, "\"u9\"");
  store.recorded.emplace(9, TopicPartition{"events", 2});
  REQUIRE(in.line(kCheckpoint8).ok());
  CHECK(store.sampled.size() == 2);
  CHECK(splits.size() == 1);
}

TEST_CASE("stage state: samples per checkpoint are bounded, the partitions taking turns",
          "[stateful][copartition]") {
  FakeStore store;
  Instance in(store);
  std::string assigned = R"({"$kpipe":"partitions","event":"assigned","partitions":[)";
  constexpr int32_t kPartitions = 10;
  for (int32_t p = 0; p < kPartitions; ++p)
    assigned +=
        fmt::format(R"({}{{"topic":"events","partition":{},"epoch":1}})", p > 0 ? "," : "", p);
  assigned += "]}";
  REQUIRE(in.line(assigned).ok());
  // Each partition sees 100 keys of its own: it keeps 16.
  for (int32_t p = 0; p < kPartitions; ++p)
    for (uint64_t k = 0; k < 100; ++k)
      offer(in.state, p, static_cast<uint64_t>(p) * 1000 + k, fmt::format("k{}", k));
  std::map<int32_t, int> per_partition;
  for (int64_t c = 1; c <= 3; ++c) {
    REQUIRE(
        in.line(fmt::format(R"({{"$kpipe":"checkpoint","id":{},"at":5,"offsets":[]}})", c)).ok());
    REQUIRE(store.sampled.size() == static_cast<size_t>(c));
    CHECK(store.sampled.back().samples.size() <= kKeySamplesPerSave);
    for (const KeySample& s : store.sampled.back().samples) ++per_partition[s.partition.partition];
  }
  // Four partitions a checkpoint, 16 keys each (the smallest hashes):
  // after three, every partition had its turn.
  CHECK(store.sampled[0].samples.size() == 64);
  CHECK(per_partition.size() == static_cast<size_t>(kPartitions));
  for (const auto& [p, n] : per_partition) CHECK(n == 16);
  CHECK(store.sampled[0].samples.front().hash == 0);
  CHECK(store.sampled[0].samples[15].hash == 15);
}

TEST_CASE("stage state: a revoked partition's samples go with it", "[stateful][copartition]") {
  FakeStore store;
  Instance in(store);
  REQUIRE(in.line(kAssigned01).ok());
  offer(in.state, 1, 9, "\"u9\"");
  REQUIRE(in.line(R"({"$kpipe":"partitions","event":"revoked","partitions":[)"
                  R"({"topic":"events","partition":1}]})")
              .ok());
  REQUIRE(in.line(kCheckpoint7).ok());
  CHECK(store.sampled.empty());
}

}  // namespace
}  // namespace kpipe
