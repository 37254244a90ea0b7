// kwindow's aggregates, private to window*.cpp: what the state of each
// aggregate of one window and key holds, where it lies among the states of
// many entries, and how a record adds to it, sessions merge it, an output
// line writes it and a snapshot saves and reads it back. The engine and the
// snapshot format hold states without looking into them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "kpipe/json.h"
#include "kpipe/report.h"
#include "kpipe/status.h"
#include "kpipe/time.h"
#include "kpipe/window.h"

namespace kpipe::window_internal {

inline constexpr const char* kFnNames[] = {"count", "sum", "min", "max", "avg", "distinct"};

// What min, max and distinct keep besides numbers: allocated only for them,
// so that the state of count, sum and avg stays small.
struct AggExtra {
  std::string text;  // min/max: a number's text as it appeared, or a string
  std::unordered_set<std::string> distinct;
};

// One aggregate of one window and key. count needs none (the entry's own
// count is it); the others use what their function needs.
struct AggState {
  int64_t i = 0;  // sum/avg: the integer sum's low 64 bits; min/max: an integer value
  // One or the other, as `mode` says (GCC defines reading the member not
  // last written, which a new state's zero does).
  union {
    double d = 0;  // sum/avg: the sum once it is not an integer; min/max: the value
    int64_t hi;    // sum/avg: the integer sum's high 64 bits
  };
  uint8_t mode = 0;  // see kSum* and kVal*
  std::unique_ptr<AggExtra> extra;

  std::string_view text() const {
    return extra ? std::string_view(extra->text) : std::string_view();
  }
  AggExtra& ensure_extra() {
    if (!extra) extra = std::make_unique<AggExtra>();
    return *extra;
  }
};

// kSumWide: a float because the integers went beyond what the sum holds
// exactly (exact128 below), not because an input was a float; said once.
inline constexpr uint8_t kSumInt = 0, kSumDouble = 1, kSumWide = 2;
inline constexpr uint8_t kValNone = 0, kValInt = 1, kValDouble = 2, kValString = 3;

// A min/max candidate. The order is total, so that the result does not
// depend on the order records arrive or sessions merge: numbers before
// strings, numbers by value then by their text (1 before 1.0), strings by
// their bytes.
struct Val {
  uint8_t mode;
  int64_t i;
  double d;
  std::string_view text;
};

inline Val val_of(const JsonField& f) {
  if (f.type == JsonType::kString) return {kValString, 0, 0, f.str};
  return {f.is_integer ? kValInt : kValDouble, f.integer, f.number, f.raw};
}
inline Val val_of(const AggState& s) {
  return {s.mode, s.i, s.d, s.text()};
}

inline int compare_val(const Val& a, const Val& b) {
  bool sa = a.mode == kValString, sb = b.mode == kValString;
  if (sa != sb) return sa ? 1 : -1;
  if (!sa) {
    if (a.mode == kValInt && b.mode == kValInt) {
      if (a.i != b.i) return a.i < b.i ? -1 : 1;
    } else if (a.d != b.d) {
      return a.d < b.d ? -1 : 1;
    }
  }
  int c = a.text.compare(b.text);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

inline void assign_val(AggState& s, const Val& v) {
  s.mode = v.mode;
  s.i = v.i;
  s.d = v.d;
  s.ensure_extra().text.assign(v.text);
}

// An integer sum is exact in 128 bits: 2^64 records of 64 bits each cannot
// overflow it, and a sum that leaves 64 bits may come back
// (9223372036854775807 + 100 - 100). Only the result written must fit.
// Integers beyond 64 bits (123456789012345678901234567890) are added
// exactly too, while the sum stays within kWideLimit: below it, the 64-bit
// inputs that follow cannot overflow the 128 bits either.
using Int128 = __int128;
inline constexpr Int128 kWideLimit = Int128{1} << 126;

inline Int128 int_sum(const AggState& s) {
  return static_cast<Int128>(static_cast<unsigned __int128>(static_cast<uint64_t>(s.hi)) << 64 |
                             static_cast<uint64_t>(s.i));
}

inline void set_int_sum(AggState& s, Int128 v) {
  s.i = static_cast<int64_t>(static_cast<uint64_t>(v));
  s.hi = static_cast<int64_t>(v >> 64);
}

// Off the hot path: the first input of a sum that is not a 64-bit integer.
void sum_add_number(AggState& s, const JsonField& f);

inline void sum_add(AggState& s, const JsonField& f) {
  if (s.mode == kSumInt) {
    if (f.is_integer) {
      set_int_sum(s, int_sum(s) + f.integer);
      return;
    }
    return sum_add_number(s, f);
  }
  s.d += f.number;
}

// The value a distinct set compares: equal JSON values give equal bytes
// (1 and 1.0 are one number; a string is its unescaped text).
void distinct_repr(const JsonField& f, std::string& out);

// The aggregates of one engine (WindowConfig::aggs) and the one place that
// knows how their states are laid out: count has none, every other
// aggregate one AggState, in the order of the aggregates; an entry (one
// window of one key) has states() of them, and a pool holds many entries'
// states end to end, entry `index` at index * states().
class Aggregates {
 public:
  // `time_format`, `has_key` and `reporter` are for the warnings of a sum
  // that cannot be written exactly (kwindow(1), Aggregates), said once.
  Aggregates(std::vector<AggSpec> specs, TimeFormat time_format, bool has_key, Reporter* reporter);

  // AggStates per entry.
  size_t states() const { return n_state_; }

  // Room for one more entry's states at the end of `pool`.
  void open(std::vector<AggState>& pool) const { pool.resize(pool.size() + n_state_); }
  AggState* at(std::vector<AggState>& pool, size_t index) const {
    return pool.data() + index * n_state_;
  }
  const AggState* at(const std::vector<AggState>& pool, size_t index) const {
    return pool.data() + index * n_state_;
  }

  // The data error of an input that an aggregate cannot take (one input per
  // aggregate, as WindowInput::aggs).
  Status check(const JsonField* const* in) const;

  // Adds one record's inputs to an entry's states.
  void add(AggState* st, const JsonField* const* in) {
    for (size_t a = 0; a < specs_.size(); ++a) {
      int k = slot_[a];
      if (k < 0) continue;
      AggState& s = st[k];
      const JsonField& f = *in[a];
      switch (specs_[a].fn) {
        case AggFn::kCount:
          break;
        case AggFn::kSum:
        case AggFn::kAvg:
          sum_add(s, f);
          break;
        case AggFn::kMin: {
          Val v = val_of(f);
          if (s.mode == kValNone || compare_val(v, val_of(s)) < 0) assign_val(s, v);
          break;
        }
        case AggFn::kMax: {
          Val v = val_of(f);
          if (s.mode == kValNone || compare_val(v, val_of(s)) > 0) assign_val(s, v);
          break;
        }
        case AggFn::kDistinct:
          distinct_repr(f, scratch_);
          s.ensure_extra().distinct.insert(scratch_);
          break;
      }
    }
  }

  // Folds an entry's states `from` into `into` (sessions that merge).
  void merge(AggState* into, AggState* from) const;

  // The aggregates' fields of an output line (,"NAME":VALUE each) for an
  // entry of `count` records; `start` and `key` name the window in a
  // warning.
  void append(std::string& out, Millis start, std::string_view key, uint64_t count,
              const AggState* st);

  // The aggregates as a snapshot saves them: ,VALUE each (null for count).
  void save(std::string& out, const AggState* st) const;
  // Reads back what save() wrote, one JSON value per aggregate, into an
  // entry's states; a message says what was wrong.
  Status load(const JsonValue* values, AggState* st) const;

  // The aggregates for a snapshot's fingerprint: " FUNCTION[:PATH]" each.
  void describe(std::string& out) const;

  size_t size() const { return specs_.size(); }

 private:
  std::string where(size_t a, Millis start, std::string_view key) const;
  void warn_wide_sum(size_t a, Millis start, std::string_view key, Int128 v);
  void warn_wider_sum(size_t a, Millis start, std::string_view key, double d);
  void warn_infinite_sum(size_t a, Millis start, std::string_view key);

  std::vector<AggSpec> specs_;
  TimeFormat time_format_;
  bool has_key_;
  Reporter* reporter_;
  bool warned_wide_ = false;      // an integer sum beyond 64 bits was written as a float
  bool warned_infinite_ = false;  // a sum beyond a double's range was written
  std::vector<int> slot_;         // per aggregate: its AggState in an entry, -1 for count
  size_t n_state_ = 0;
  std::vector<std::string> field_head_;  // per aggregate: ,"name":
  std::string scratch_;                  // distinct's value of an input
};

}  // namespace kpipe::window_internal
