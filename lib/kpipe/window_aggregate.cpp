#include "kpipe/window_aggregate.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

namespace kpipe::window_internal {

namespace {

bool fits_int64(Int128 v) {
  return v >= std::numeric_limits<int64_t>::min() && v <= std::numeric_limits<int64_t>::max();
}

// The sum as a double from now on: an input was not an integer.
void sum_to_double(AggState& s) {
  double d = static_cast<double>(int_sum(s));
  s.d = d;
  s.mode = kSumDouble;
}

// A number's text is an integer's when it has no point and no exponent
// (JSON's grammar); the JSON reader gives one beyond 64 bits as a double.
bool is_integer_text(std::string_view raw) {
  return raw.find_first_of(".eE") == std::string_view::npos;
}

// An integer's text as an Int128 if it is within kWideLimit.
std::optional<Int128> parse_wide(std::string_view raw) {
  bool negative = !raw.empty() && raw[0] == '-';
  if (negative) raw.remove_prefix(1);
  if (raw.empty()) return std::nullopt;
  Int128 v = 0;
  for (char c : raw) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
    if (v >= kWideLimit) return std::nullopt;
  }
  return negative ? -v : v;
}

// `v` added to the integer sum while the result stays within kWideLimit;
// past it, the sum goes on as the float nearest the exact result.
void add_wide(AggState& s, Int128 v) {
  Int128 sum = 0;
  if (__builtin_add_overflow(int_sum(s), v, &sum)) {
    s.d = static_cast<double>(int_sum(s)) + static_cast<double>(v);
  } else if (sum >= kWideLimit || sum <= -kWideLimit) {
    s.d = static_cast<double>(sum);
  } else {
    set_int_sum(s, sum);
    return;
  }
  s.mode = kSumWide;
}

// Folds the sum `o` into `s` (sessions that merge).
void sum_merge(AggState& s, const AggState& o) {
  if (s.mode == kSumInt && o.mode == kSumInt) return add_wide(s, int_sum(o));
  if (s.mode == kSumInt) {
    sum_to_double(s);
    if (o.mode == kSumWide) s.mode = kSumWide;
  }
  s.d += o.mode == kSumInt ? static_cast<double>(int_sum(o)) : o.d;
}

double sum_value(const AggState& s) {
  return s.mode == kSumInt ? static_cast<double>(int_sum(s)) : s.d;
}

void append_int128(std::string& out, Int128 v) {
  char buf[48];
  char* p = buf + sizeof buf;
  auto u = static_cast<unsigned __int128>(v);
  if (v < 0) u = -u;
  do {
    *--p = static_cast<char>('0' + static_cast<int>(u % 10));
    u /= 10;
  } while (u != 0);
  if (v < 0) *--p = '-';
  out.append(p, static_cast<size_t>(buf + sizeof buf - p));
}

// A float whose integer text would look exact: always with an exponent.
void append_float(std::string& out, double d) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

Status check_input(const AggSpec& a, const JsonField& f) {
  if (a.fn == AggFn::kCount) return {};
  if (f.type == JsonType::kMissing) return data_error("field '{}' is missing", a.path);
  switch (a.fn) {
    case AggFn::kSum:
    case AggFn::kAvg:
      if (f.type != JsonType::kNumber)
        return data_error("field '{}' is {}, not a number ({})", a.path, json_type_phrase(f.type),
                          kFnNames[int(a.fn)]);
      // A number beyond what a double holds (1e400) reaches a stage as its
      // text alone: there is nothing to add.
      if (!f.is_integer && !std::isfinite(f.number))
        return data_error("field '{}' is {}, a number beyond the range of a 64-bit float ({})",
                          a.path, f.raw, kFnNames[int(a.fn)]);
      return {};
    case AggFn::kMin:
    case AggFn::kMax:
      if (f.type != JsonType::kNumber && f.type != JsonType::kString)
        return data_error("field '{}' is {}, not a number or a string ({})", a.path,
                          json_type_phrase(f.type), kFnNames[int(a.fn)]);
      return {};
    default:
      return {};
  }
}

std::string format_double_exact(double d) {
  return fmt::format("{}", d);
}

// One aggregate's state as a snapshot saves it.
void save_state(const AggSpec& spec, const AggState& s, std::string& v) {
  switch (spec.fn) {
    case AggFn::kCount:
      break;
    case AggFn::kSum:
    case AggFn::kAvg:
      // An integer sum as a number, or beyond 64 bits as its [high, low]
      // halves (which an older kwindow refuses rather than misreads);
      // a double as its shortest exact text.
      if (s.mode != kSumInt) {
        append_json_string(v, format_double_exact(s.d));
      } else if (Int128 sum = int_sum(s); fits_int64(sum)) {
        append_int(v, static_cast<int64_t>(sum));
      } else {
        v.push_back('[');
        append_int(v, s.hi);
        v.push_back(',');
        append_int(v, s.i);
        v.push_back(']');
      }
      break;
    case AggFn::kMin:
    case AggFn::kMax: {
      std::string tagged(s.mode == kValString ? "s" : "n");
      tagged += s.text();
      append_json_string(v, tagged);
      break;
    }
    case AggFn::kDistinct: {
      v.push_back('[');
      bool first = true;
      if (s.extra) {
        // Sorted, so that equal states give equal snapshots.
        std::vector<std::string_view> values(s.extra->distinct.begin(), s.extra->distinct.end());
        std::sort(values.begin(), values.end());
        for (std::string_view d : values) {
          if (!first) v.push_back(',');
          first = false;
          append_json_string(v, d);
        }
      }
      v.push_back(']');
      break;
    }
  }
}

Status load_state(const AggSpec& spec, const JsonValue& v, AggState& s) {
  switch (spec.fn) {
    case AggFn::kCount:
      return {};
    case AggFn::kSum:
    case AggFn::kAvg:
      if (v.type == JsonType::kNumber && v.is_integer) {
        s.mode = kSumInt;
        set_int_sum(s, v.integer);
        return {};
      }
      if (v.type == JsonType::kArray && v.items.size() == 2 && v.items[0].is_integer &&
          v.items[1].is_integer && v.items[0].type == JsonType::kNumber &&
          v.items[1].type == JsonType::kNumber) {
        s.mode = kSumInt;
        s.hi = v.items[0].integer;
        s.i = v.items[1].integer;
        return {};
      }
      if (v.type == JsonType::kString) {
        s.mode = kSumDouble;
        s.d = std::strtod(v.str.c_str(), nullptr);
        return {};
      }
      return failure("bad sum");
    case AggFn::kMin:
    case AggFn::kMax: {
      if (v.type != JsonType::kString || v.str.empty())
        return failure("bad {}", kFnNames[int(spec.fn)]);
      s.ensure_extra().text = v.str.substr(1);
      if (v.str[0] == 's') {
        s.mode = kValString;
        return {};
      }
      auto n = parse_json(s.extra->text);
      if (!n || n->type != JsonType::kNumber) return failure("bad number");
      s.mode = n->is_integer ? kValInt : kValDouble;
      s.i = n->integer;
      s.d = n->number;
      return {};
    }
    case AggFn::kDistinct:
      if (v.type != JsonType::kArray) return failure("bad distinct");
      for (const JsonValue& d : v.items) {
        if (d.type != JsonType::kString) return failure("bad distinct value");
        s.ensure_extra().distinct.insert(d.str);
      }
      return {};
  }
  return {};
}

}  // namespace

[[gnu::noinline]] void sum_add_number(AggState& s, const JsonField& f) {
  if (sum_reads_text(f) && is_integer_text(f.raw)) {
    if (auto v = parse_wide(f.raw)) return add_wide(s, *v);
    sum_to_double(s);
    s.mode = kSumWide;
  } else {
    sum_to_double(s);
  }
  s.d += f.number;
}

void distinct_repr(const JsonField& f, std::string& out) {
  out.clear();
  switch (f.type) {
    case JsonType::kString:
      out.push_back('s');
      out.append(f.str);
      return;
    case JsonType::kNumber:
      // Beyond a double's range (1e400, -1e400) a number is its text: as
      // doubles they would all be one of two infinities.
      if (!f.is_integer && !std::isfinite(f.number)) {
        out.push_back('t');
        out.append(f.raw);
        return;
      }
      out.push_back('n');
      if (f.is_integer) {
        append_int(out, f.integer);
      } else {
        append_double(out, f.number);
      }
      return;
    case JsonType::kObject:
    case JsonType::kArray:
      out.push_back('j');
      append_minified(out, f.raw);
      return;
    default:
      out.push_back('l');  // null, true, false
      out.append(f.raw);
      return;
  }
}

Aggregates::Aggregates(std::vector<AggSpec> specs, TimeFormat time_format, bool has_key,
                       Reporter* reporter)
    : specs_(std::move(specs)), time_format_(time_format), has_key_(has_key), reporter_(reporter) {
  for (const AggSpec& a : specs_) {
    slot_.push_back(a.fn == AggFn::kCount ? -1 : static_cast<int>(n_state_++));
    std::string h = ",";
    append_json_string(h, a.name);
    h.push_back(':');
    field_head_.push_back(std::move(h));
  }
}

Status Aggregates::check(const JsonField* const* in) const {
  for (size_t a = 0; a < specs_.size(); ++a) {
    if (specs_[a].fn == AggFn::kCount) continue;
    KPIPE_TRY(check_input(specs_[a], *in[a]));
  }
  return {};
}

void Aggregates::merge(AggState* into, AggState* from) const {
  for (size_t a = 0; a < specs_.size(); ++a) {
    int k = slot_[a];
    if (k < 0) continue;
    AggState& s = into[k];
    AggState& o = from[k];
    switch (specs_[a].fn) {
      case AggFn::kCount:
        break;
      case AggFn::kSum:
      case AggFn::kAvg:
        sum_merge(s, o);
        break;
      case AggFn::kMin:
        if (o.mode != kValNone && (s.mode == kValNone || compare_val(val_of(o), val_of(s)) < 0))
          assign_val(s, val_of(o));
        break;
      case AggFn::kMax:
        if (o.mode != kValNone && (s.mode == kValNone || compare_val(val_of(o), val_of(s)) > 0))
          assign_val(s, val_of(o));
        break;
      case AggFn::kDistinct:
        if (!o.extra) break;
        if (!s.extra) {
          s.extra = std::move(o.extra);
          break;
        }
        s.extra->distinct.merge(o.extra->distinct);
        break;
    }
  }
}

// What a sum cannot write exactly is written as a float, or as null
// (JSON has no infinity), and said once of each kind: kwindow(1),
// Aggregates.
[[gnu::cold]] std::string Aggregates::where(size_t a, Millis start, std::string_view key) const {
  const AggSpec& spec = specs_[a];
  std::string w = fmt::format("{} '{}' of the window at ", kFnNames[int(spec.fn)], spec.name);
  if (time_format_ == TimeFormat::kMillis) {
    append_int(w, start);
  } else {
    append_rfc3339(w, start);
  }
  if (has_key_) w += fmt::format(" with key {}", key);
  return w;
}

[[gnu::cold]] void Aggregates::warn_wide_sum(size_t a, Millis start, std::string_view key,
                                             Int128 v) {
  warned_wide_ = true;
  if (reporter_ == nullptr) return;
  std::string exact, written;
  append_int128(exact, v);
  append_float(written, static_cast<double>(v));
  reporter_->warning(
      fmt::format("{}: the sum is {}, beyond 64-bit integers: written as the float {} (said once)",
                  where(a, start, key), exact, written));
}

[[gnu::cold]] void Aggregates::warn_wider_sum(size_t a, Millis start, std::string_view key,
                                              double d) {
  warned_wide_ = true;
  if (reporter_ == nullptr) return;
  std::string written;
  append_float(written, d);
  reporter_->warning(
      fmt::format("{}: the sum of integers is beyond 2^126, where exact sums end: written as the "
                  "float {} (said once)",
                  where(a, start, key), written));
}

[[gnu::cold]] void Aggregates::warn_infinite_sum(size_t a, Millis start, std::string_view key) {
  warned_infinite_ = true;
  if (reporter_ == nullptr) return;
  reporter_->warning(
      fmt::format("{}: the sum is beyond the range of a 64-bit float: written as null (said once)",
                  where(a, start, key)));
}

void Aggregates::append(std::string& out, Millis start, std::string_view key, uint64_t count,
                        const AggState* st) {
  for (size_t a = 0; a < specs_.size(); ++a) {
    out += field_head_[a];
    if (specs_[a].fn == AggFn::kCount) {
      append_uint(out, count);
      continue;
    }
    const AggState& s = st[slot_[a]];
    switch (specs_[a].fn) {
      case AggFn::kCount:
        break;
      case AggFn::kSum:
        if (s.mode == kSumInt) {
          Int128 v = int_sum(s);
          if (fits_int64(v)) {
            append_int(out, static_cast<int64_t>(v));
            break;
          }
          if (!warned_wide_) warn_wide_sum(a, start, key, v);
          append_float(out, static_cast<double>(v));
          break;
        }
        if (s.mode == kSumWide && std::isfinite(s.d)) {
          if (!warned_wide_) warn_wider_sum(a, start, key, s.d);
          append_float(out, s.d);
          break;
        }
        if (!std::isfinite(s.d) && !warned_infinite_) warn_infinite_sum(a, start, key);
        append_double(out, s.d);
        break;
      case AggFn::kAvg: {
        double sum = sum_value(s);
        if (!std::isfinite(sum) && !warned_infinite_) warn_infinite_sum(a, start, key);
        append_double(out, sum / static_cast<double>(count));
        break;
      }
      case AggFn::kMin:
      case AggFn::kMax:
        if (s.mode == kValString) {
          append_json_string(out, s.text());
        } else {
          out += s.text();
        }
        break;
      case AggFn::kDistinct:
        append_uint(out, s.extra ? s.extra->distinct.size() : 0);
        break;
    }
  }
}

void Aggregates::save(std::string& out, const AggState* st) const {
  for (size_t a = 0; a < specs_.size(); ++a) {
    out.push_back(',');
    if (specs_[a].fn == AggFn::kCount) {
      out += "null";
      continue;
    }
    save_state(specs_[a], st[slot_[a]], out);
  }
}

Status Aggregates::load(const JsonValue* values, AggState* st) const {
  for (size_t a = 0; a < specs_.size(); ++a) {
    if (slot_[a] < 0) continue;
    KPIPE_TRY(load_state(specs_[a], values[a], st[slot_[a]]));
  }
  return {};
}

void Aggregates::describe(std::string& out) const {
  for (const AggSpec& a : specs_) {
    out += " ";
    out += kFnNames[int(a.fn)];
    if (!a.path.empty()) out += ":" + a.path;
  }
}

}  // namespace kpipe::window_internal
