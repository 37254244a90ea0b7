// The Avro codec's encoding: JSON, plain or in Avro's own encoding, built
// into the schema's reused value, then written by libavro behind the frame.
#include "kpipe/schema/avro_internal.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "kpipe/json.h"
#include "kpipe/quote.h"
#include "kpipe/time.h"

namespace kpipe::avro {

namespace {

// A value in an encoding error, shown shorter than most: it follows the
// field's path.
constexpr QuoteStyle kAvroValueQuote{.max_shown = 40};

// The first number of a valid JSON text that simdjson's DOM cannot hold:
// an integer beyond 64 bits, or beyond a double's range (1e400). Its text,
// for a message that names the number as the user wrote it.
std::string_view unreadable_number(std::string_view json) {
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '"') {
      for (++i; i < json.size() && json[i] != '"'; ++i)
        if (json[i] == '\\') ++i;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    size_t end = i;
    while (end < json.size() &&
           std::string_view("0123456789+-.eE").find(json[end]) != std::string_view::npos)
      ++end;
    const std::string_view number = json.substr(i, end - i);
    i = end - 1;
    if (number.find_first_of(".eE") == std::string_view::npos) {
      int64_t x = 0;
      uint64_t u = 0;
      const char* last = number.data() + number.size();
      if (std::from_chars(number.data(), last, x).ec == std::errc() ||
          std::from_chars(number.data(), last, u).ec == std::errc())
        continue;
      return number;
    }
    if (std::isinf(std::strtod(std::string(number).c_str(), nullptr))) return number;
  }
  return {};
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

JsonType json_type(dom::element e) {
  switch (e.type()) {
    case dom::element_type::ARRAY:
      return JsonType::kArray;
    case dom::element_type::OBJECT:
      return JsonType::kObject;
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
    case dom::element_type::DOUBLE:
      return JsonType::kNumber;
    case dom::element_type::STRING:
      return JsonType::kString;
    case dom::element_type::BOOL:
      return JsonType::kBool;
    case dom::element_type::NULL_VALUE:
      return JsonType::kNull;
  }
  return JsonType::kMissing;
}

// Reads "hh:mm:ss" with any fraction, floored to 1/per_second; -1 if it is
// not such a time of day.
int64_t parse_time_of_day(std::string_view s, int64_t per_second) {
  auto two = [&](size_t at, int max) -> int {
    if (at + 2 > s.size() || !is_digit(s[at]) || !is_digit(s[at + 1])) return -1;
    int v = (s[at] - '0') * 10 + (s[at + 1] - '0');
    return v > max ? -1 : v;
  };
  int h = two(0, 23), m = s.size() > 2 && s[2] == ':' ? two(3, 59) : -1,
      sec = s.size() > 5 && s[5] == ':' ? two(6, 59) : -1;
  if (h < 0 || m < 0 || sec < 0) return -1;
  int64_t v = ((h * 60 + m) * 60 + sec) * per_second;
  if (s.size() == 8) return v;
  if (s[8] != '.' || s.size() == 9) return -1;
  int64_t unit = per_second;
  for (size_t i = 9; i < s.size(); ++i) {
    if (!is_digit(s[i])) return -1;
    unit /= 10;
    v += (s[i] - '0') * unit;
  }
  return v;
}

}  // namespace

Status AvroCodec::avro_fault(const char* what) {
  return field_error(fmt::format("libavro cannot {}: {}", what, avro_strerror()));
}

Error AvroCodec::field_error(std::string_view why) const {
  if (path_.empty()) return data_error("avro: {}", why);
  return data_error("avro: field '{}': {}", format_path(path_.data(), path_.size()), why);
}

Error AvroCodec::mismatch(const char* expected, dom::element e) const {
  return field_error(
      fmt::format("expected {}, found {}", expected, json_type_phrase(json_type(e))));
}

Status AvroCodec::encode(std::string_view json, int32_t schema_id, std::string& out) {
  auto found = schema(schema_id);
  if (!found) return found.take_error();
  Compiled& c = **found;
  padded_.assign(json);
  padded_.resize(json.size() + simdjson::SIMDJSON_PADDING);
  dom::element root;
  if (parser_.parse(padded_.data(), json.size(), false).get(root)) {
    if (!json_checker_) json_checker_ = std::make_unique<PayloadEncoder>();
    Status why = json_checker_->check(json);
    if (!why.ok()) return data_error("avro: {}", why.error().message);
    // Valid JSON that simdjson's DOM refuses holds a number it cannot.
    std::string_view number = unreadable_number(json);
    if (number.find_first_of(".eE") != std::string_view::npos)
      return data_error("avro: {} is beyond the range of a 64-bit float", number);
    if (!number.empty())
      return data_error("avro: {} is an integer beyond 64 bits: no Avro int or long holds it",
                        number);
    return data_error("avro: not valid JSON");
  }
  path_.clear();
  seen_.clear();
  if (avro_value_reset(&c.value)) return avro_fault("reset a value");
  KPIPE_TRY(build(c, c.root, root, &c.value, false));
  size_t size = 0;
  if (avro_value_sizeof(&c.value, &size)) return avro_fault("size the value");
  const size_t at = out.size();
  append_frame(out, schema_id);
  const size_t body = out.size();
  out.resize(body + size);
  avro_writer_memory_set_dest(writer_, out.data() + body, static_cast<int64_t>(size));
  if (avro_value_write(writer_, &c.value)) {
    out.resize(at);
    return avro_fault("write the value");
  }
  return {};
}

Status AvroCodec::build(const Compiled& c, uint32_t at, dom::element e, avro_value_t* v,
                        bool in_default) {
  const Node& n = c.nodes[at];
  // Avro's JSON encoding (and every default) writes bytes as code points.
  const bool raw = options_.avro_standard_json || in_default;
  switch (n.kind) {
    case Kind::kNull:
      if (!e.is_null()) return mismatch("null", e);
      if (avro_value_set_null(v)) return avro_fault("set null");
      return {};
    case Kind::kBoolean: {
      bool b = false;
      if (e.get(b)) return mismatch("a boolean", e);
      if (avro_value_set_boolean(v, b)) return avro_fault("set a boolean");
      return {};
    }
    case Kind::kInt:
      return build_int(n, e, v);
    case Kind::kLong:
      return build_long(n, e, v, raw);
    case Kind::kFloat:
    case Kind::kDouble:
      return build_real(n, e, v);
    case Kind::kString: {
      std::string_view s;
      if (e.get(s)) return mismatch("a string", e);
      // simdjson's strings end with a NUL, which libavro counts in the size.
      if (avro_value_set_string_len(v, s.data(), s.size() + 1)) return avro_fault("set a string");
      return {};
    }
    case Kind::kBytes:
    case Kind::kFixed:
      return build_bytes(n, e, v, raw);
    case Kind::kEnum: {
      std::string_view s;
      if (e.get(s)) return mismatch(fmt::format("a symbol of enum {}", n.short_name).c_str(), e);
      for (size_t i = 0; i < n.symbols.size(); ++i) {
        if (n.symbols[i] != s) continue;
        if (avro_value_set_enum(v, static_cast<int>(i))) return avro_fault("set an enum");
        return {};
      }
      return field_error(
          fmt::format("{} is not a symbol of enum {}", quoted(s, kAvroValueQuote), n.short_name));
    }
    case Kind::kArray: {
      dom::array a;
      if (e.get(a)) return mismatch("an array", e);
      size_t i = 0;
      for (dom::element item : a) {
        avro_value_t child;
        if (avro_value_append(v, &child, nullptr)) return avro_fault("append to an array");
        path_.push_back({{}, i++, true});
        KPIPE_TRY(build(c, n.children[0], item, &child, in_default));
        path_.pop_back();
      }
      return {};
    }
    case Kind::kMap: {
      dom::object o;
      if (e.get(o)) return mismatch("an object", e);
      for (auto it = o.begin(); it != o.end(); ++it) {
        std::string_view key = it.key();
        path_.push_back({key, 0, false});
        if (key.find('\0') != std::string_view::npos)
          return field_error("a map key with a NUL character");
        avro_value_t child;
        int is_new = 0;
        if (avro_value_add(v, it.key_c_str(), &child, nullptr, &is_new))
          return avro_fault("add to a map");
        if (!is_new) return field_error("appears twice");
        KPIPE_TRY(build(c, n.children[0], it.value(), &child, in_default));
        path_.pop_back();
      }
      return {};
    }
    case Kind::kRecord:
      return build_record(c, n, e, v, in_default);
    case Kind::kUnion:
      return build_union(c, n, e, v, in_default);
  }
  return field_error("an unknown type");
}

Status AvroCodec::build_record(const Compiled& c, const Node& n, dom::element e, avro_value_t* v,
                               bool in_default) {
  dom::object o;
  if (e.get(o)) return mismatch(fmt::format("an object (record {})", n.short_name).c_str(), e);
  const size_t base = seen_.size();
  const size_t count = n.fields.size();
  seen_.resize(base + count, 0);
  size_t hint = 0;  // JSON written from a record has its fields in order
  for (auto [key, value] : o) {
    size_t i = hint < count && n.fields[hint].name == key ? hint : count;
    for (size_t k = 0; i == count && k < count; ++k)
      if (n.fields[k].name == key) i = k;
    path_.push_back({key, 0, false});
    if (i == count) return field_error(fmt::format("not a field of record {}", n.short_name));
    if (seen_[base + i]) return field_error("appears twice");
    seen_[base + i] = 1;
    hint = i + 1;
    avro_value_t child;
    if (avro_value_get_by_index(v, i, &child, nullptr)) return avro_fault("get a field");
    KPIPE_TRY(build(c, n.fields[i].type, value, &child, in_default));
    path_.pop_back();
  }
  for (size_t i = 0; i < count; ++i) {
    if (seen_[base + i]) continue;
    const Field& f = n.fields[i];
    path_.push_back({f.name, 0, false});
    if (!f.has_default) return field_error("missing, and it has no default");
    avro_value_t child;
    if (avro_value_get_by_index(v, i, &child, nullptr)) return avro_fault("get a field");
    KPIPE_TRY(build(c, f.type, f.default_value, &child, true));
    path_.pop_back();
  }
  seen_.resize(base);
  return {};
}

// How well a union's branch suits a JSON value: 0 not at all, then 1 (the
// first choice) upwards, so that plain JSON picks the branch it means.
int AvroCodec::rank(const Compiled& c, uint32_t branch, dom::element e) {
  const Node& b = c.nodes[branch];
  switch (e.type()) {
    case dom::element_type::NULL_VALUE:
      return b.kind == Kind::kNull ? 1 : 0;
    case dom::element_type::BOOL:
      return b.kind == Kind::kBoolean ? 1 : 0;
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
      if (b.kind == Kind::kInt || b.kind == Kind::kLong) return 1;
      if (b.kind == Kind::kFloat || b.kind == Kind::kDouble) return 2;
      return b.logical == Logical::kDecimal ? 3 : 0;
    case dom::element_type::DOUBLE:
      if (b.kind == Kind::kFloat || b.kind == Kind::kDouble) return 1;
      if (b.logical == Logical::kDecimal) return 2;
      // Microseconds as fractional milliseconds (epoch_millis).
      if (b.logical == Logical::kTimestampMicros || b.logical == Logical::kLocalTimestampMicros)
        return 2;
      return 0;
    case dom::element_type::STRING:
      switch (b.kind) {
        case Kind::kString:
          return 1;
        case Kind::kEnum:
          return 2;
        case Kind::kBytes:
        case Kind::kFixed:
        case Kind::kFloat:
        case Kind::kDouble:
          return 3;
        case Kind::kInt:
        case Kind::kLong:
          return b.logical != Logical::kNone ? 3 : 0;
        default:
          return 0;
      }
    case dom::element_type::ARRAY:
      return b.kind == Kind::kArray ? 1 : 0;
    case dom::element_type::OBJECT: {
      if (b.kind == Kind::kMap) return 2;
      if (b.kind != Kind::kRecord) return 0;
      dom::object o = e.get_object().value_unsafe();
      for (const Field& f : b.fields) {
        dom::element ignored;
        if (!f.has_default && o[f.name].get(ignored)) return 4;
      }
      for (auto [key, value] : o) {
        bool known = false;
        for (const Field& f : b.fields) known = known || f.name == key;
        if (!known) return 3;
      }
      return 1;
    }
  }
  return 0;
}

Status AvroCodec::build_union(const Compiled& c, const Node& n, dom::element e, avro_value_t* v,
                              bool in_default) {
  auto take = [&](size_t i, dom::element value) -> Status {
    avro_value_t branch;
    if (avro_value_set_branch(v, static_cast<int>(i), &branch))
      return avro_fault("set a union's branch");
    return build(c, n.children[i], value, &branch, in_default);
  };
  // A default is of the first branch (the specification, before 1.12).
  if (in_default) return take(0, e);
  // Avro's JSON encoding: {"type name": value}.
  dom::object o;
  if (!e.get(o) && o.size() == 1) {
    auto [key, value] = *o.begin();
    for (size_t i = 0; i < n.children.size(); ++i) {
      const Node& b = c.nodes[n.children[i]];
      if (b.branch_name == key || (is_named(b.kind) && b.short_name == key)) return take(i, value);
    }
  }
  // Plain JSON: the branch its type suits best, trying the next on failure
  // (an int branch and a number too large for it, a string that is no
  // symbol of an enum but a time).
  const size_t first = candidates_.size();
  for (size_t i = 0; i < n.children.size(); ++i)
    if (int r = rank(c, n.children[i], e); r > 0)
      candidates_.emplace_back(r, static_cast<uint32_t>(i));
  std::stable_sort(candidates_.begin() + static_cast<std::ptrdiff_t>(first), candidates_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t last = candidates_.size();
  const size_t depth = path_.size();
  const size_t seen = seen_.size();
  Status first_error;
  for (size_t k = first; k < last; ++k) {
    Status s = take(candidates_[k].second, e);
    if (s.ok()) {
      candidates_.resize(first);
      return s;
    }
    if (first_error.ok()) first_error = std::move(s);
    path_.resize(depth);
    seen_.resize(seen);
  }
  candidates_.resize(first);
  if (!first_error.ok()) return first_error;
  std::string names;
  for (uint32_t b : n.children) {
    if (!names.empty()) names.append(", ");
    names.append(c.nodes[b].branch_name);
  }
  return field_error(
      fmt::format("{} fits no branch of the union [{}]", json_type_phrase(json_type(e)), names));
}

Status AvroCodec::build_int(const Node& n, dom::element e, avro_value_t* v) {
  int64_t x = 0;
  std::string_view s;
  if (!e.get(s)) {
    if (n.logical == Logical::kDate) {
      Expected<Millis> t = data_error("");
      if (s.size() == 10) {
        scratch_.assign(s);
        scratch_.append("T00:00:00Z");
        t = parse_rfc3339(scratch_);
      }
      if (!t)
        return field_error(
            fmt::format("{} is not a date (yyyy-mm-dd)", quoted(s, kAvroValueQuote)));
      x = *t / kDay;
    } else if (n.logical == Logical::kTimeMillis) {
      x = parse_time_of_day(s, 1000);
      if (x < 0)
        return field_error(
            fmt::format("{} is not a time of day (hh:mm:ss.sss)", quoted(s, kAvroValueQuote)));
    } else {
      return mismatch("an integer", e);
    }
  } else if (e.get(x)) {
    // Between 2^63 and 2^64 the number is exact as an unsigned integer:
    // named as written, not as the double it would round to.
    if (uint64_t u = 0; !e.get(u)) return field_error(fmt::format("{} does not fit an int", u));
    double d = 0;
    if (e.get(d)) return mismatch("an integer", e);
    if (d != std::trunc(d)) return field_error(fmt::format("{} is not an integer", d));
    if (!(std::fabs(d) <= 9e15)) return field_error(fmt::format("{} does not fit an int", d));
    x = static_cast<int64_t>(d);
  }
  if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
    return field_error(fmt::format("{} does not fit an int", x));
  if (avro_value_set_int(v, static_cast<int32_t>(x))) return avro_fault("set an int");
  return {};
}

Status AvroCodec::build_long(const Node& n, dom::element e, avro_value_t* v, bool raw) {
  const bool micros =
      n.logical == Logical::kTimestampMicros || n.logical == Logical::kLocalTimestampMicros;
  const bool timestamp = micros || n.logical == Logical::kTimestampMillis ||
                         n.logical == Logical::kLocalTimestampMillis;
  const bool local =
      n.logical == Logical::kLocalTimestampMillis || n.logical == Logical::kLocalTimestampMicros;
  int64_t x = 0;
  std::string_view s;
  if (!e.get(s)) {
    if (timestamp) {
      auto t = parse_rfc3339(s);
      if (!t && local) {
        // Local times are written without an offset.
        scratch_.assign(s);
        scratch_.push_back('Z');
        auto bare = parse_rfc3339(scratch_);
        if (bare) t = bare;
      }
      if (!t) return field_error(t.error().message);
      x = *t;
      if (micros) {
        // parse_rfc3339 floors to the millisecond; the next three digits.
        int64_t sub = 0;
        if (s.size() > 19 && s[19] == '.') {
          size_t end = 20;
          while (end < s.size() && is_digit(s[end])) ++end;
          for (size_t i = 23; i < 26; ++i) sub = sub * 10 + (i < end ? s[i] - '0' : 0);
        }
        if (__builtin_mul_overflow(x, 1000, &x) || __builtin_add_overflow(x, sub, &x))
          return field_error(fmt::format("{} is out of range", quoted(s, kAvroValueQuote)));
      }
    } else if (n.logical == Logical::kTimeMicros) {
      x = parse_time_of_day(s, 1'000'000);
      if (x < 0)
        return field_error(
            fmt::format("{} is not a time of day (hh:mm:ss.ssssss)", quoted(s, kAvroValueQuote)));
    } else {
      return mismatch("an integer", e);
    }
  } else if (!e.get(x)) {
    // Plain JSON has epoch milliseconds for every timestamp
    // (DecodeOptions::epoch_millis); Avro's JSON the long itself.
    if (micros && !raw && __builtin_mul_overflow(x, 1000, &x))
      return field_error(fmt::format("{} ms is out of range", x));
  } else if (uint64_t u = 0; !e.get(u)) {
    // Beyond 2^63 and exact: named as written, not as a rounded double.
    if (micros && !raw) return field_error(fmt::format("{} ms is out of range", u));
    return field_error(fmt::format("{} does not fit a long", u));
  } else {
    double d = 0;
    if (e.get(d)) return mismatch("an integer", e);
    const bool scaled = micros && !raw;
    if (scaled) d *= 1000;
    if (d != std::trunc(d) && !scaled) return field_error(fmt::format("{} is not an integer", d));
    if (!(std::fabs(d) < 9.2e18)) return field_error(fmt::format("{} does not fit a long", d));
    x = scaled ? std::llround(d) : static_cast<int64_t>(d);
  }
  if (avro_value_set_long(v, x)) return avro_fault("set a long");
  return {};
}

Status AvroCodec::build_real(const Node& n, dom::element e, avro_value_t* v) {
  double d = 0;
  std::string_view s;
  if (!e.get(s)) {
    if (s == "NaN")
      d = std::numeric_limits<double>::quiet_NaN();
    else if (s == "Infinity")
      d = std::numeric_limits<double>::infinity();
    else if (s == "-Infinity")
      d = -std::numeric_limits<double>::infinity();
    else
      return field_error(
          fmt::format("expected a number, found the string {}", quoted(s, kAvroValueQuote)));
  } else if (e.get(d)) {
    return mismatch("a number", e);
  }
  if (n.kind == Kind::kDouble) {
    if (avro_value_set_double(v, d)) return avro_fault("set a double");
    return {};
  }
  // Beyond the largest float by half a step or more would round to infinity.
  if (std::isfinite(d) && std::fabs(d) >= 0x1.ffffffp127)
    return field_error(fmt::format("{} does not fit a float", d));
  if (avro_value_set_float(v, static_cast<float>(d))) return avro_fault("set a float");
  return {};
}

Status AvroCodec::build_bytes(const Node& n, dom::element e, avro_value_t* v, bool raw) {
  std::string_view s;
  const bool is_string = !e.get(s);
  if (n.logical == Logical::kDecimal && !(raw && is_string)) {
    if (is_string) return set_decimal(n, s, v);
    char buf[32];
    std::to_chars_result r{};
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    if (!e.get(i))
      r = std::to_chars(buf, buf + sizeof buf, i);
    else if (!e.get(u))
      r = std::to_chars(buf, buf + sizeof buf, u);
    else if (!e.get(d))
      r = std::to_chars(buf, buf + sizeof buf, d);
    else
      return mismatch("a decimal string or number", e);
    return set_decimal(n, std::string_view(buf, static_cast<size_t>(r.ptr - buf)), v);
  }
  if (!is_string) return mismatch(raw ? "a string of bytes" : "a base64 string", e);
  scratch_.clear();
  if (raw) {
    // Code points U+0000..U+00FF, one byte each.
    for (size_t i = 0; i < s.size(); ++i) {
      auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) {
        scratch_.push_back(static_cast<char>(c));
      } else if ((c == 0xC2 || c == 0xC3) && i + 1 < s.size()) {
        scratch_.push_back(static_cast<char>(((c & 0x03) << 6) | (s[++i] & 0x3F)));
      } else {
        return field_error("bytes as a string may only hold the code points U+0000 to U+00FF");
      }
    }
  } else {
    auto decoded = decode_base64(s);
    if (!decoded) return field_error(fmt::format("{} is not base64", quoted(s, kAvroValueQuote)));
    scratch_ = std::move(*decoded);
  }
  if (n.kind == Kind::kFixed && static_cast<int64_t>(scratch_.size()) != n.size)
    return field_error(
        fmt::format("fixed {} holds {} bytes, found {}", n.short_name, n.size, scratch_.size()));
  return set_bytes_or_fixed(n, scratch_.data(), scratch_.size(), v);
}

Status AvroCodec::set_decimal(const Node& n, std::string_view text, avro_value_t* v) {
  auto bad = [&](std::string_view why) {
    return field_error(fmt::format("{} is not a decimal({}, {}): {}", quoted(text, kAvroValueQuote),
                                   n.precision, n.scale, why));
  };
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  digits_.clear();
  size_t whole = 0, fraction = 0;
  for (; i < text.size() && is_digit(text[i]); ++i, ++whole) digits_.push_back(text[i]);
  if (i < text.size() && text[i] == '.')
    for (++i; i < text.size() && is_digit(text[i]); ++i, ++fraction) digits_.push_back(text[i]);
  if (whole + fraction == 0) return bad("no digits");
  int64_t exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool minus = false;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) minus = text[i++] == '-';
    size_t start = i;
    for (; i < text.size() && is_digit(text[i]) && exponent < 1'000'000; ++i)
      exponent = exponent * 10 + (text[i] - '0');
    if (i == start) return bad("no digits in the exponent");
    if (minus) exponent = -exponent;
  }
  if (i != text.size()) return bad("not a number");
  // digits_ * 10^(exponent - fraction), rescaled to the schema's scale.
  const int64_t shift = exponent - static_cast<int64_t>(fraction) + n.scale;
  if (shift < 0) {
    const auto drop = static_cast<size_t>(-shift);
    for (size_t k = 0; k < drop; ++k) {
      if (digits_.empty()) break;
      if (digits_.back() != '0')
        return bad(fmt::format("more than {} digits after the point", n.scale));
      digits_.pop_back();
    }
  } else {
    if (shift > n.precision) {
      // Zeros beyond the precision matter only if some digit is not zero.
      if (digits_.find_first_not_of('0') != std::string::npos)
        return bad(fmt::format("more than {} digits", n.precision));
      digits_.clear();
    } else {
      digits_.append(static_cast<size_t>(shift), '0');
    }
  }
  size_t lead = digits_.find_first_not_of('0');
  digits_.erase(0, lead == std::string::npos ? digits_.size() : lead);
  if (digits_.size() > static_cast<size_t>(n.precision))
    return bad(fmt::format("more than {} digits", n.precision));
  // The unscaled value in two's complement, little-endian, then the fewest
  // big-endian bytes that keep its sign (as Java's BigInteger writes it).
  big_.assign(1, 0);
  for (char d : digits_) {
    unsigned carry = static_cast<unsigned>(d - '0');
    for (uint8_t& byte : big_) {
      unsigned x = byte * 10u + carry;
      byte = static_cast<uint8_t>(x);
      carry = x >> 8;
    }
    if (carry) big_.push_back(static_cast<uint8_t>(carry));
  }
  big_.push_back(0);
  if (negative && !digits_.empty()) negate_twos_complement(big_.begin(), big_.end());
  while (big_.size() > 1) {
    uint8_t top = big_.back(), next = big_[big_.size() - 2];
    if ((top == 0 && !(next & 0x80)) || (top == 0xFF && (next & 0x80)))
      big_.pop_back();
    else
      break;
  }
  if (n.kind == Kind::kFixed) {
    if (static_cast<int64_t>(big_.size()) > n.size)
      return bad(fmt::format("too large for fixed {}", n.short_name));
    big_.resize(static_cast<size_t>(n.size), (big_.back() & 0x80) ? 0xFF : 0);
  }
  std::reverse(big_.begin(), big_.end());
  return set_bytes_or_fixed(n, big_.data(), big_.size(), v);
}

// The bytes of a bytes or fixed value (a fixed's size checked already).
Status AvroCodec::set_bytes_or_fixed(const Node& n, void* data, size_t size, avro_value_t* v) {
  if (n.kind == Kind::kFixed) {
    if (avro_value_set_fixed(v, data, size)) return avro_fault("set a fixed");
    return {};
  }
  if (avro_value_set_bytes(v, data, size)) return avro_fault("set bytes");
  return {};
}

}  // namespace kpipe::avro
