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
