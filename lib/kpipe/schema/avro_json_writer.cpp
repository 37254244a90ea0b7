// The JSON writers that the Avro codec's decoding writes through: numbers,
// strings, bytes and times, straight into the output with one room check
// per value.
#include "kpipe/schema/avro_internal.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>

#include "kpipe/json.h"
#include "kpipe/time.h"

namespace kpipe::avro {

namespace {

// Writes `\u00XX`, the escape of a byte that has no shorter one.
char* put_unicode_escape(char* p, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
  std::memcpy(p, esc, 6);
  return p + 6;
}

}  // namespace

void put_float(JsonOut& out, float v) {
  if (put_non_finite(out, v)) return;
  // A float's own shortest text: 0.1f is "0.1", not the double nearest it.
  if (v == std::trunc(v) && std::fabs(v) < 1e15f) return put_int(out, static_cast<int64_t>(v));
  char* p = out.room(32);
  out.advance_to(std::to_chars(p, p + 32, v).ptr);
}

bool put_short_decimal(JsonOut& out, double v) {
  const double a = std::fabs(v);
  if (!(a >= 1 && a < 1e12) || a == std::trunc(a)) return false;
  static constexpr double kScales[] = {10, 100, 1000};
  for (int k = 0; k < 3; ++k) {
    const double m = std::round(a * kScales[k]);
    if (m / kScales[k] != a) continue;
    const auto digits = static_cast<uint64_t>(m);
    const auto scale = static_cast<uint64_t>(kScales[k]);
    char* p = out.room(24);
    if (v < 0) *p++ = '-';
    p = std::to_chars(p, p + 16, digits / scale).ptr;
    *p++ = '.';
    p = write_digits(p, digits % scale, k + 1);
    out.advance_to(p);
    return true;
  }
  return false;
}

void put_scaled_millis(JsonOut& out, int64_t v, int64_t per_milli, int fraction_digits) {
  uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  char* p = out.room(32);
  if (v < 0) *p++ = '-';
  p = std::to_chars(p, p + 24, mag / static_cast<uint64_t>(per_milli)).ptr;
  if (uint64_t frac = mag % static_cast<uint64_t>(per_milli); frac != 0) {
    *p++ = '.';
    p = write_digits(p, frac, fraction_digits);
  }
  out.advance_to(p);
}

void put_code_points(JsonOut& out, const unsigned char* b, size_t n) {
  char* p = out.room(n * 6 + 2);
  *p++ = '"';
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = b[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      *p++ = static_cast<char>(c);
    } else if (c == '"' || c == '\\') {
      *p++ = '\\';
      *p++ = static_cast<char>(c);
    } else {
      p = put_unicode_escape(p, c);
    }
  }
  *p++ = '"';
  out.advance_to(p);
}

bool put_json_string(JsonOut& out, const char* s, size_t n) {
  constexpr size_t kLong = 4096;  // beyond, six bytes of room per byte is too many
  if (n > kLong) {
    if (!is_valid_utf8(std::string_view(s, n))) return false;
    append_json_string(out.string(), std::string_view(s, n));
    out.resume();
    return true;
  }
  static constexpr auto kEscape = [] {
    std::array<char, 256> t{};  // 0: as it is; 'u': \u00XX; else the short escape
    for (int c = 0; c < 0x20; ++c) t[static_cast<size_t>(c)] = 'u';
    t['\b'] = 'b';
    t['\f'] = 'f';
    t['\n'] = 'n';
    t['\r'] = 'r';
    t['\t'] = 't';
    t['"'] = '"';
    t['\\'] = '\\';
    return t;
  }();
  char* const begin = out.room(n * 6 + 2);
  char* p = begin;
  *p++ = '"';
  unsigned any = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    any |= c;
    const char e = kEscape[c];
    if (e == 0) {
      *p++ = static_cast<char>(c);
    } else if (e != 'u') {
      *p++ = '\\';
      *p++ = e;
    } else {
      p = put_unicode_escape(p, c);
    }
  }
  *p++ = '"';
  if ((any & 0x80) && !is_valid_utf8(std::string_view(s, n))) return false;
  out.advance_to(p);
  return true;
}

void put_time_of_day(JsonOut& out, int64_t ms, uint64_t fraction, int fraction_digits) {
  char* p = out.room(24);
  *p++ = '"';
  p = write_digits(p, static_cast<uint64_t>(ms / kHour), 2);
  *p++ = ':';
  p = write_digits(p, static_cast<uint64_t>(ms / kMinute % 60), 2);
  *p++ = ':';
  p = write_digits(p, static_cast<uint64_t>(ms / kSecond % 60), 2);
  *p++ = '.';
  p = write_digits(p, fraction, fraction_digits);
  *p++ = '"';
  out.advance_to(p);
}

}  // namespace kpipe::avro
