#include "kpipe/store/state_store.h"

#include <catch2/catch.hpp>

#include <map>

using namespace kpipe;

namespace {

// The smallest Snapshottable: a map that records what changed.
class MapEngine final : public Snapshottable {
 public:
  void put(const std::string& k, const std::string& v) {
    map_[k] = v;
    dirty_[k] = true;
  }
  void erase(const std::string& k) {
    map_.erase(k);
    dirty_[k] = false;
  }
  void take_changes(StateChanges& out) override {
    for (auto& [k, present] : dirty_) {
      if (present) {
        out.put.emplace_back(k, map_[k]);
      } else {
        out.removed.push_back(k);
      }
    }
    dirty_.clear();
  }
  Status restore_entry(std::string_view k, std::string_view v) override {
    map_[std::string(k)] = std::string(v);
    return {};
  }
  std::map<std::string, std::string> map_;
  std::map<std::string, bool> dirty_;
};

std::unique_ptr<StateStore> memory_store() {
  auto db = Database::open(":memory:");
  REQUIRE(db.ok());
  static std::vector<std::unique_ptr<Database>> keep;
  keep.push_back(std::move(*db));
  auto store = StateStore::attach(*keep.back());
  REQUIRE(store.ok());
  return std::move(*store);
}

void snapshot(StateStore& store, MapEngine& e, int64_t id) {
  StateChanges changes;
  e.take_changes(changes);
  REQUIRE(store.save_snapshot("dedup", id, changes, 1000 + id).ok());
}

void complete(StateStore& store, int64_t id, int64_t offset) {
  Checkpoint c{id, 500 + id, {{"events", 0, offset}}};
  REQUIRE(store.complete(c, "kcheckpoint", 2000 + id).ok());
}

std::map<std::string, std::string> restored(StateStore& store,
                                            std::optional<int64_t>* at = nullptr) {
  MapEngine fresh;
  auto r = store.restore("dedup", fresh);
  REQUIRE(r.ok());
  if (at != nullptr) *at = *r;
  return fresh.map_;
}

}  // namespace

TEST_CASE("a stage restores the state of the newest complete checkpoint") {
  auto store = memory_store();
  MapEngine e;
  e.put("a", "1");
  e.put("b", "2");
  snapshot(*store, e, 1);
  complete(*store, 1, 10);
  e.put("a", "3");  // changed
  e.erase("b");     // removed
  e.put("c", "4");  // added
  snapshot(*store, e, 2);
  // Checkpoint 2 never completes: a restart restores checkpoint 1.
  std::optional<int64_t> at;
  CHECK(restored(*store, &at) == std::map<std::string, std::string>{{"a", "1"}, {"b", "2"}});
  CHECK(at == 1);
}

TEST_CASE("incremental snapshots add up to the whole state") {
  auto store = memory_store();
  MapEngine e;
  e.put("a", "1");
  snapshot(*store, e, 1);
  complete(*store, 1, 1);
  e.put("b", "2");
  snapshot(*store, e, 2);
  complete(*store, 2, 2);
  e.put("a", "9");
  e.erase("b");
  e.put("c", "3");
  snapshot(*store, e, 3);
  complete(*store, 3, 3);
  CHECK(restored(*store) == e.map_);
  auto snaps = store->snapshots();
  REQUIRE(snaps.ok());
  REQUIRE(snaps->size() == 3);
  CHECK((*snaps)[2].entries == 3);  // only what changed in checkpoint 3
}

TEST_CASE("restoring drops snapshots after the complete checkpoint and prunes history") {
  auto store = memory_store();
  MapEngine e;
  e.put("a", "1");
  snapshot(*store, e, 1);
  complete(*store, 1, 1);
  e.put("a", "2");
  snapshot(*store, e, 2);
  complete(*store, 2, 2);
  e.put("z", "never complete");
  snapshot(*store, e, 3);
  CHECK(restored(*store) == std::map<std::string, std::string>{{"a", "2"}});
  // What was dropped stays dropped; the old version of "a" is gone too.
  auto count = store->db().prepare("SELECT COUNT(*) FROM stage_state");
  REQUIRE(count.ok());
  REQUIRE(*count->step());
  CHECK(count->column_int(0) == 1);
  auto problems = store->verify();
  REQUIRE(problems.ok());
  CHECK(problems->empty());
}

TEST_CASE("completing a checkpoint stores its offsets as the pipeline's positions") {
  auto store = memory_store();
  auto next = store->next_checkpoint_id();
  REQUIRE(next.ok());
  CHECK(*next == 1);
  REQUIRE(store->record_emitted(1, 100).ok());
  REQUIRE(store->record_emitted(2, 200).ok());
  CHECK(*store->next_checkpoint_id() == 3);  // ids grow even past incomplete ones
  Checkpoint c{2, 200, {{"events", 0, 10}, {"events", 1, 20}}};
  REQUIRE(store->complete(c, "kcheckpoint", 300).ok());
  Checkpoint later{3, 300, {{"events", 1, 25}}};
  REQUIRE(store->complete(later, "kcheckpoint", 400).ok());
  auto offsets = store->offsets();
  REQUIRE(offsets.ok());
  REQUIRE(offsets->size() == 2);
  CHECK((*offsets)[0].offset == 10);
  CHECK((*offsets)[0].checkpoint == 2);
  CHECK((*offsets)[1].offset == 25);
  CHECK((*offsets)[1].committed_at == 400);
  CHECK(*store->latest_complete() == 3);
  // The same checkpoint again (a replay after a crash) changes nothing; an
  // older one is a protocol error.
  CHECK(store->complete(later, "kcheckpoint", 500).ok());
  CHECK(!store->complete(c, "kcheckpoint", 500).ok());
  auto history = store->checkpoints();
  REQUIRE(history.ok());
  REQUIRE(history->size() == 3);
  CHECK(!(*history)[0].completed_at);
  CHECK((*history)[2].partitions == 1);
}

TEST_CASE("offsets set by hand replace the positions") {
  auto store = memory_store();
  REQUIRE(store->set_offsets({{"events", 0, 5}}, 10).ok());
  auto offsets = store->offsets();
  REQUIRE(offsets.ok());
  REQUIRE(offsets->size() == 1);
  CHECK((*offsets)[0].offset == 5);
  CHECK((*offsets)[0].checkpoint == 0);
}
