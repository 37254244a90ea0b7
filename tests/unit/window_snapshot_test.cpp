// window_snapshot.cpp has no header of its own: its code is WindowEngine's
// Snapshottable face (kpipe/window.h), tested through it.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "window_fixtures.h"

// kwindow's snapshots: the keys and values a state store holds, what a
// restore refuses, and bytes that an earlier kwindow wrote.

namespace kpipe {
namespace {

using namespace window_test;

TEST_CASE("window: take_changes returns only the windows changed since the previous call",
          "[window]") {
  // Aligned windows are saved a window at a time: one entry per window
  // ("b/START"), with every key of it.
  WindowConfig c = tumble(10, {"count", "sum:.v"});
  c.track_changes = true;
  Run run(c);
  for (int k = 0; k < 20; ++k) run.add(1, "\"k" + std::to_string(k) + "\"", {integer(k)});
  StateChanges changes;
  run.engine().take_changes(changes);
  CHECK(changes.put.size() == 1 + 1 + 1);  // meta, the partition, window [0, 10)
  CHECK(changes.removed.empty());
  const std::string& first = changes.put.back().second;
  CHECK(changes.put.back().first == "b/0");
  // Each key once, with its entry: [key length, key, value length, value].
  CHECK(first.find("\x04\"k3\"\x0f[10,3,1,null,3]") != std::string::npos);

  changes.clear();
  run.engine().take_changes(changes);
  CHECK(changes.empty());

  // One key changes: its window is saved again, whole.
  run.add(1, "\"k3\"", {integer(1)});
  changes.clear();
  run.engine().take_changes(changes);
  REQUIRE(changes.put.size() == 1);
  CHECK(changes.put[0].first == "b/0");
  CHECK(changes.put[0].second.find("\x04\"k3\"\x0f[10,3,2,null,4]") != std::string::npos);
  CHECK(changes.put[0].second.size() == first.size());

  // A record in the next window: that window, the partition and the meta
  // (watermark); then the watermark frees [0, 10): one removal.
  run.add(10, "\"k0\"", {integer(1)});
  changes.clear();
  run.engine().take_changes(changes);
  CHECK(changes.put.size() == 3);
  CHECK(changes.removed == std::vector<std::string>{"b/0"});

  // A window made and freed between two calls leaves no trace.
  run.add(25, "\"x\"", {integer(1)});
  changes.clear();
  run.engine().take_changes(changes);
  for (const auto& [k, v] : changes.put) CHECK(k != "b/10");
  CHECK(changes.removed == std::vector<std::string>{"b/10"});
  run.add(31, "\"y\"", {integer(1)});
  run.add(45, "\"y\"", {integer(1)});
  changes.clear();
  run.engine().take_changes(changes);
  for (const auto& [k, v] : changes.put) CHECK(k != "b/30");
  CHECK(changes.removed == std::vector<std::string>{"b/20"});
}

TEST_CASE("window: sums beyond 64 bits survive a snapshot, and the older forms still read",
          "[window]") {
  WindowConfig c = tumble(10, {"sum:.v"});
  c.track_changes = true;
  Run run(c);
  run.add(1, "\"a\"", {integer(INT64_MAX)});
  run.add(1, "\"a\"", {integer(INT64_MAX)});
  StateChanges changes;
  run.engine().take_changes(changes);
  std::map<std::string, std::string> store = apply_changes({}, changes);
  // 2^64 - 2: its high and low halves, which an older kwindow refuses.
  CHECK(store.at("b/0") == std::string("\x03\"a\"\x0f[10,0,2,[0,-2]]"));
  Run restored(c);
  for (const auto& [k, v] : store) REQUIRE(restored.engine().restore_entry(k, v).ok());
  REQUIRE(restored.engine().finish_restore().ok());
  restored.add(1, "\"a\"", {integer(-INT64_MAX)});
  restored.flush();
  CHECK(restored.take() == Lines{line(0, 10, "\"a\"", "\"sum_v\":9223372036854775807")});

  // An integer sum as a number, a sum of numbers as its text: as saved
  // before 128-bit sums.
  for (auto [saved, sum] : {std::pair{"5", "5"}, std::pair{"\"2.5\"", "2.5"},
                            std::pair{"-9223372036854775808", "-9223372036854775808"}}) {
    Run old(c);
    std::string value = "[10,0,2," + std::string(saved) + "]";
    std::string blob = "\x03\"a\"" + std::string(1, static_cast<char>(value.size())) + value;
    REQUIRE(old.engine()
                .restore_entry("meta",
                               "{\"config\":\"tumble 10ms; key .k; agg sum:.v\","
                               "\"watermark\":null,\"seq\":1}")
                .ok());
    REQUIRE(old.engine().restore_entry("b/0", blob).ok());
    REQUIRE(old.engine().finish_restore().ok());
    old.flush();
    CHECK(old.take() == Lines{line(0, 10, "\"a\"", "\"sum_v\":" + std::string(sum))});
  }
}

TEST_CASE("window: a snapshot made with other window options is refused on restore", "[window]") {
  WindowConfig c = tumble(10);
  c.track_changes = true;
  Run run(c);
  run.add(1);
  StateChanges changes;
  run.engine().take_changes(changes);

  WindowConfig other = tumble(20);
  other.track_changes = true;
  FakeClock clock;
  WindowEngine fresh(other, clock);
  Status s;
  for (const auto& [k, v] : changes.put) {
    s = fresh.restore_entry(k, v);
    if (!s.ok()) break;
  }
  if (s.ok()) s = fresh.finish_restore();
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kFailure);
  CHECK(s.error().message ==
        "the saved state was made with other options (tumble 10ms; key .k; agg count), not these "
        "(tumble 20ms; key "
        ".k; agg count): give another --name or state file");

  WindowEngine garbage(c, clock);
  Status g = garbage.restore_entry("w/x/\"a\"", "[1]");
  REQUIRE_FALSE(g.ok());
  CHECK(g.error().message == "saved state entry 'w/x/\"a\"': malformed key");
  Status h = garbage.restore_entry("b/0", "\x09\"a\"");
  REQUIRE_FALSE(h.ok());
  CHECK(h.error().message == "saved state entry 'b/0': truncated");
}

}  // namespace
}  // namespace kpipe
