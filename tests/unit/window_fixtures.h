// What the tests of kwindow's engine, its aggregates and its snapshots
// share: records as the stage hands them over, configurations, an engine
// with the lines it wrote, and a snapshot applied to a store.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fakes.h"
#include "kpipe/snapshot.h"
#include "kpipe/window.h"

namespace kpipe::window_test {

inline constexpr Millis kMin = 60 * 1000;

// --- building records ----------------------------------------------------------

// A JSON value as the stage would hand it over (JsonReader fills the same
// fields).
struct Value {
  JsonField field;
  std::string raw;
  std::string str;

  Value() = default;
  Value(const Value& o) : field(o.field), raw(o.raw), str(o.str) { fix(); }
  Value& operator=(const Value& o) {
    field = o.field;
    raw = o.raw;
    str = o.str;
    fix();
    return *this;
  }
  void fix() {
    field.raw = raw;
    field.str = str;
  }
};

inline Value integer(int64_t v) {
  Value x;
  x.field.type = JsonType::kNumber;
  x.field.is_integer = true;
  x.field.integer = v;
  x.field.number = static_cast<double>(v);
  x.raw = std::to_string(v);
  x.fix();
  return x;
}

inline Value number(double v, std::string text) {
  Value x;
  x.field.type = JsonType::kNumber;
  x.field.number = v;
  x.raw = std::move(text);
  x.fix();
  return x;
}

inline Value string(std::string s) {
  Value x;
  x.field.type = JsonType::kString;
  x.str = s;
  x.raw = "\"" + s + "\"";
  x.fix();
  return x;
}

inline Value of_type(JsonType t, std::string raw) {
  Value x;
  x.field.type = t;
  x.raw = std::move(raw);
  x.fix();
  return x;
}

struct Record {
  Millis t = 0;
  std::string key;  // JSON text
  int64_t partition = -1;
  std::string topic;
  std::vector<Value> aggs;  // one per non-count aggregate, in order
};

inline WindowConfig tumble(Millis size, std::vector<std::string> aggs = {"count"}) {
  WindowConfig c;
  c.shape.kind = WindowKind::kTumble;
  c.shape.size = size;
  c.keys = {".k"};
  c.time_format = TimeFormat::kMillis;
  for (const std::string& a : aggs) {
    auto spec = parse_agg_spec(a);
    REQUIRE(spec.ok());
    c.aggs.push_back(*spec);
  }
  return c;
}

inline WindowConfig slide(Millis size, Millis every, std::vector<std::string> aggs = {"count"}) {
  WindowConfig c = tumble(size, std::move(aggs));
  c.shape.kind = WindowKind::kSlide;
  c.shape.every = every;
  return c;
}

inline WindowConfig session(Millis gap, std::vector<std::string> aggs = {"count"}) {
  WindowConfig c = tumble(gap, std::move(aggs));
  c.shape.kind = WindowKind::kSession;
  return c;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    REQUIRE(nl != std::string::npos);
    lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return lines;
}

// An engine and what it wrote.
class Run {
 public:
  explicit Run(WindowConfig c) : config_(std::move(c)) {
    REQUIRE(validate_window_config(config_).ok());
    engine_ = std::make_unique<WindowEngine>(config_, clock_, &reporter_);
  }

  Placement add(const Record& r) {
    auto placed = try_add(r);
    if (!placed) FAIL("refused: " << placed.error().message);
    return *placed;
  }

  Expected<Placement> try_add(const Record& r) {
    std::vector<const JsonField*> inputs;
    size_t next = 0;
    for (const AggSpec& a : config_.aggs) {
      if (a.fn == AggFn::kCount) {
        inputs.push_back(nullptr);
        continue;
      }
      REQUIRE(next < r.aggs.size());
      inputs.push_back(&r.aggs[next++].field);
    }
    WindowInput in;
    in.time = r.t;
    in.key = r.key;
    in.partition = r.partition;
    in.topic = r.topic;
    in.aggs = inputs.data();
    return engine_->add(in, out_);
  }

  std::optional<Placement> placement(const Record& r) {
    WindowInput in;
    in.time = r.t;
    in.key = r.key;
    return engine_->placement(in);
  }

  Placement add(Millis t, std::string key = "\"a\"", std::vector<Value> aggs = {}) {
    Record r;
    r.t = t;
    r.key = std::move(key);
    r.aggs = std::move(aggs);
    return add(r);
  }

  // The lines written since the previous call.
  std::vector<std::string> take() {
    auto lines = split_lines(out_);
    out_.clear();
    return lines;
  }
  void flush() { engine_->flush(out_); }
  void idle() { engine_->on_idle(out_); }

  WindowEngine& engine() { return *engine_; }
  FakeClock& clock() { return clock_; }
  RecordingReporter& reporter() { return reporter_; }
  const WindowConfig& config() const { return config_; }

 private:
  WindowConfig config_;
  FakeClock clock_;
  RecordingReporter reporter_;
  std::unique_ptr<WindowEngine> engine_;
  std::string out_;
};

inline std::string line(Millis start, Millis end, std::string key, std::string aggs,
                        bool late = false) {
  return "{\"window_start\":" + std::to_string(start) + ",\"window_end\":" + std::to_string(end) +
         ",\"key\":" + key + "," + aggs + ",\"emit\":\"" + (late ? "late" : "on_time") + "\"}";
}

using Lines = std::vector<std::string>;

inline std::map<std::string, std::string> apply_changes(std::map<std::string, std::string> store,
                                                        const StateChanges& c) {
  for (const auto& [k, v] : c.put) store[k] = v;
  for (const std::string& k : c.removed) store.erase(k);
  return store;
}

}  // namespace kpipe::window_test
