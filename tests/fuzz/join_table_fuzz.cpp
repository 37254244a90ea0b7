// kjoin's table (kpipe/join.h): rows put and erased by key, every version
// by time, and the saved state they are restored from. Properties: the
// engine answers every lookup as a plain map model does (lookup joins: the
// newest row; as-of joins: the newest version at or before the time); what
// take_changes() saves restores (restore_entry) into an engine that answers
// the same; a key's versions that decode (from any text, as a damaged state
// store could give) encode to a text that decodes to the same versions, in
// ascending time, and arbitrary saved entries never crash a restore.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "kpipe/join.h"

namespace {

class StillClock final : public kpipe::Clock {
 public:
  kpipe::Millis now() override { return 0; }
  kpipe::Millis steady() override { return 0; }
  void sleep_for(kpipe::Millis) override {}
};

using Versions = std::map<kpipe::Millis, std::optional<std::string>>;

std::optional<std::string> model_as_of(const std::map<std::string, Versions>& model,
                                       const std::string& key, kpipe::Millis t) {
  auto it = model.find(key);
  if (it == model.end()) return std::nullopt;
  auto at = it->second.upper_bound(t);
  if (at == it->second.begin()) return std::nullopt;
  return std::prev(at)->second;
}

void check_versions_text(FuzzedDataProvider& in) {
  const std::string key = in.ConsumeRandomLengthString(16);
  const std::string text = in.ConsumeRandomLengthString(256);
  kpipe::VersionedTable table;
  if (!table.decode(key, text).ok()) return;
  auto encoded = table.encode(key);
  FUZZ_CHECK(encoded.has_value());
  kpipe::VersionedTable again;
  FUZZ_CHECK(again.decode(key, *encoded).ok());
  FUZZ_CHECK(again.encode(key) == encoded);
  // Decoded versions answer for their own times (ascending, one per time).
  kpipe::VersionedTable probe;
  FUZZ_CHECK(probe.decode(key, *encoded).ok());
  std::string_view rest(*encoded);
  rest.remove_prefix(std::min(rest.size(), rest.find(';')));
  std::optional<kpipe::Millis> previous;
  while (!rest.empty()) {
    rest.remove_prefix(1);  // ';'
    const size_t comma = rest.find(',');
    const kpipe::Millis t = std::stoll(std::string(rest.substr(0, comma)));
    rest.remove_prefix(comma + 1);
    const size_t comma2 = rest.find(',');
    const long long length = std::stoll(std::string(rest.substr(0, comma2)));
    rest.remove_prefix(comma2 + 1);
    std::optional<std::string_view> row;
    if (length >= 0) {
      row = rest.substr(0, static_cast<size_t>(length));
      rest.remove_prefix(static_cast<size_t>(length));
    }
    FUZZ_CHECK(!previous || *previous < t);
    previous = t;
    auto found = probe.find(key, t);
    FUZZ_CHECK(!found.pruned);
    FUZZ_CHECK(found.row == row);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const uint8_t what = in.ConsumeIntegral<uint8_t>();
  if (what % 4 == 3) {
    check_versions_text(in);
    return 0;
  }
  if (what % 4 == 2) {
    // Arbitrary saved entries: refused or restored, never a crash.
    StillClock clock;
    kpipe::JoinEngine engine(what & 4 ? kpipe::JoinMode::kAsOf : kpipe::JoinMode::kLookup,
                             (what & 8) != 0, 0, 0, clock);
    while (in.remaining_bytes() > 0) {
      const std::string key = in.ConsumeRandomLengthString(32);
      const std::string value = in.ConsumeRandomLengthString(64);
      (void)engine.restore_entry(key, value);
    }
    (void)engine.finish_restore();
    (void)engine.rows();
    return 0;
  }

  const bool as_of = what % 4 == 1;
  const auto mode = as_of ? kpipe::JoinMode::kAsOf : kpipe::JoinMode::kLookup;
  StillClock clock;
  kpipe::JoinEngine engine(mode, true, 0, 0, clock);
  engine.set_tracking(true);
  std::map<std::string, std::string> lookup_model;
  std::map<std::string, Versions> versions_model;
  std::set<std::string> keys;
  // The snapshot as a state store keeps it: each take_changes() applied
  // in turn, its puts then its removals (one name appears once in each).
  std::map<std::string, std::string> snapshot;
  auto save = [&] {
    kpipe::StateChanges changes;
    engine.take_changes(changes);
    for (const auto& [name, value] : changes.put) snapshot[name] = value;
    for (const auto& name : changes.removed) snapshot.erase(name);
  };
  int64_t offset = 0;

  while (in.remaining_bytes() > 0) {
    const uint8_t op = in.ConsumeIntegral<uint8_t>();
    // Few distinct keys, so that puts replace and erase find something.
    std::string key = in.ConsumeRandomLengthString(8);
    if (op & 0x80) key = std::string(1, static_cast<char>('a' + (op & 3)));
    const kpipe::Millis t = in.ConsumeIntegralInRange<int64_t>(-5, 20);
    keys.insert(key);
    switch (op % 4) {
      case 0:
      case 1: {
        const std::string row = in.ConsumeRandomLengthString(24);
        engine.apply(key, t, row, 0, ++offset);
        lookup_model[key] = row;
        versions_model[key][t] = row;
        break;
      }
      case 2:
        engine.apply(key, t, std::nullopt, 0, ++offset);
        lookup_model.erase(key);
        versions_model[key][t] = std::nullopt;
        break;
      case 3:
        save();
        break;
    }
  }
  save();

  StillClock clock2;
  kpipe::JoinEngine restored(mode, true, 0, 0, clock2);
  for (const auto& [name, value] : snapshot) FUZZ_CHECK(restored.restore_entry(name, value).ok());
  FUZZ_CHECK(restored.finish_restore().ok());
  FUZZ_CHECK(restored.offsets() == engine.offsets());

  for (const std::string& key : keys) {
    if (!as_of) {
      auto it = lookup_model.find(key);
      const std::optional<std::string_view> want =
          it == lookup_model.end() ? std::nullopt : std::optional<std::string_view>(it->second);
      FUZZ_CHECK(engine.find(key) == want);
      FUZZ_CHECK(restored.find(key) == want);
      continue;
    }
    for (kpipe::Millis t = -6; t <= 21; ++t) {
      const auto want = model_as_of(versions_model, key, t);
      const auto got = engine.find_as_of(key, t);
      const auto got2 = restored.find_as_of(key, t);
      FUZZ_CHECK(!got.pruned && !got2.pruned);
      FUZZ_CHECK(got.row == want);
      FUZZ_CHECK(got2.row == want);
    }
  }
  FUZZ_CHECK(restored.rows() == engine.rows());
  return 0;
}
