#include "kpipe/time.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "kpipe/quote.h"

namespace kpipe {
namespace {

// Numeric event times are carried through JSON doubles downstream, so only
// times a double holds exactly are accepted.
constexpr Millis kMaxExactMillis = Millis{1} << 53;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// Howard Hinnant's days_from_civil: days since 1970-01-01 in the proleptic
// Gregorian calendar, valid for any year an int64_t holds without overflow
// of the day count.
constexpr int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);                 // [0, 399]
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

struct Civil {
  int64_t year;
  unsigned month;
  unsigned day;
};

// Howard Hinnant's civil_from_days, the inverse of days_from_civil.
constexpr Civil civil_from_days(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);                    // [0, 146096]
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const int64_t y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);  // [0, 365]
  const unsigned mp = (5 * doy + 2) / 153;                       // [0, 11]
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;               // [1, 31]
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;                  // [1, 12]
  return {y + (m <= 2), m, d};
}

static_assert(days_from_civil(1970, 1, 1) == 0);
static_assert(days_from_civil(2000, 3, 1) == 11017);
static_assert(civil_from_days(-1).year == 1969 && civil_from_days(-1).day == 31);
static_assert(kMinTime == days_from_civil(0, 1, 1) * kDay);
static_assert(kMaxTime == days_from_civil(10000, 1, 1) * kDay - 1);

bool is_leap_year(int64_t y) {
  return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

unsigned days_in_month(int64_t y, unsigned m) {
  constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap_year(y) ? 29 : kDays[m - 1];
}

// --- durations ---------------------------------------------------------------

struct DurationUnit {
  std::string_view name;
  Millis millis;
};

constexpr DurationUnit kDurationUnits[] = {
    {"ms", 1}, {"s", kSecond}, {"m", kMinute}, {"h", kHour}, {"d", kDay},
};

// Spellings people reach for, so a mistake gets a suggestion instead of
// only the list of units.
struct UnitAlias {
  std::string_view alias;
  std::string_view unit;
};

constexpr UnitAlias kUnitAliases[] = {
    {"msec", "ms"},   {"msecs", "ms"},  {"millis", "ms"}, {"sec", "s"},  {"secs", "s"},
    {"second", "s"},  {"seconds", "s"}, {"min", "m"},     {"mins", "m"}, {"minute", "m"},
    {"minutes", "m"}, {"hr", "h"},      {"hrs", "h"},     {"hour", "h"}, {"hours", "h"},
    {"day", "d"},     {"days", "d"},
};

const DurationUnit* find_duration_unit(std::string_view name) {
  for (const auto& u : kDurationUnits)
    if (u.name == name) return &u;
  return nullptr;
}

std::string_view suggest_duration_unit(std::string_view name) {
  std::string lower(name);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  if (const DurationUnit* u = find_duration_unit(lower)) return u->name;
  for (const auto& a : kUnitAliases)
    if (a.alias == lower) return a.unit;
  return {};
}

// floor(0.<digits> * unit), exact for any number of digits: long
// multiplication from the last digit, whose final carry is the integer part.
Millis fraction_of(std::string_view digits, Millis unit) {
  Millis carry = 0;
  for (size_t i = digits.size(); i-- > 0;) carry = ((digits[i] - '0') * unit + carry) / 10;
  return carry;
}

// --- RFC 3339 ----------------------------------------------------------------

// Reads `n` digits at `pos`; false if any is missing or not a digit.
bool read_digits(std::string_view text, size_t pos, size_t n, unsigned& value) {
  if (pos + n > text.size()) return false;
  value = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!is_digit(text[i])) return false;
    value = value * 10 + static_cast<unsigned>(text[i] - '0');
  }
  return true;
}

Error not_rfc3339(std::string_view text, std::string_view why) {
  return data_error("{} is not an RFC 3339 time ({})", quoted(text), why);
}

char* write_2(char* p, unsigned v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
  return p + 2;
}

Error out_of_range(std::string_view value, TimeUnit unit) {
  return data_error("time '{}' ({}) is out of range (more than 2^53 ms from the epoch)", value,
                    time_unit_name(unit));
}

}  // namespace

Expected<Millis> parse_duration(std::string_view text) {
  if (text.empty()) return usage_error("duration '' is empty (write e.g. 30s, 5m or 1h30m)");
  if (text == "0") return Millis{0};
  if (text[0] == '-') return usage_error("duration {} is negative", quoted(text));

  Millis total = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t number_begin = i;
    if (!is_digit(text[i])) {
      if (is_alpha(text[i]))
        return usage_error("duration {} has a unit without a number before it", quoted(text));
      return usage_error("duration {} has an unexpected {}", quoted(text),
                         quoted(text.substr(i, 1)));
    }
    Millis whole = 0;
    bool too_large = false;
    for (; i < text.size() && is_digit(text[i]); ++i) {
      const int digit = text[i] - '0';
      if (whole > (std::numeric_limits<Millis>::max() - digit) / 10) too_large = true;
      if (!too_large) whole = whole * 10 + digit;
    }
    std::string_view fraction;
    if (i < text.size() && text[i] == '.') {
      const size_t fraction_begin = ++i;
      while (i < text.size() && is_digit(text[i])) ++i;
      if (i == fraction_begin)
        return usage_error("duration {} has no digits after '.'", quoted(text));
      fraction = text.substr(fraction_begin, i - fraction_begin);
    }
    const std::string_view number = text.substr(number_begin, i - number_begin);

    const size_t unit_begin = i;
    while (i < text.size() && is_alpha(text[i])) ++i;
    const std::string_view unit_name = text.substr(unit_begin, i - unit_begin);
    if (unit_name.empty()) {
      if (unit_begin < text.size())
        return usage_error("duration {} has an unexpected {}", quoted(text),
                           quoted(text.substr(unit_begin, 1)));
      if (number_begin == 0)
        return usage_error("duration {} has no unit (write {}s or {}ms)", quoted(text), number,
                           number);
      return usage_error("duration {} has no unit after {}", quoted(text), quoted(number));
    }
    const DurationUnit* unit = find_duration_unit(unit_name);
    if (unit == nullptr) {
      const std::string_view suggestion = suggest_duration_unit(unit_name);
      if (!suggestion.empty())
        return usage_error("duration {} has unknown unit {}, did you mean '{}'?", quoted(text),
                           quoted(unit_name), suggestion);
      return usage_error("duration {} has unknown unit {} (units: ms, s, m, h, d)", quoted(text),
                         quoted(unit_name));
    }

    Millis part = 0;
    if (too_large || __builtin_mul_overflow(whole, unit->millis, &part) ||
        __builtin_add_overflow(part, fraction_of(fraction, unit->millis), &part) ||
        __builtin_add_overflow(total, part, &total))
      return usage_error("duration {} is too large", quoted(text));
  }
  return total;
}

std::string format_duration(Millis d) {
  if (d == 0) return "0s";
  std::string out;
  // Unsigned, so that the most negative value has a magnitude too.
  uint64_t rest = static_cast<uint64_t>(d);
  if (d < 0) {
    out += '-';
    rest = 0 - rest;
  }
  for (size_t i = std::size(kDurationUnits); i-- > 0;) {
    const auto unit = static_cast<uint64_t>(kDurationUnits[i].millis);
    const uint64_t count = rest / unit;
    if (count == 0) continue;
    rest -= count * unit;
    fmt::format_to(std::back_inserter(out), "{}{}", count, kDurationUnits[i].name);
  }
  return out;
}

Expected<Millis> parse_rfc3339(std::string_view text) {
  // yyyy-mm-ddThh:mm:ss[.f+](Z|+hh:mm|-hh:mm), positions fixed by RFC 3339.
  unsigned year, month, day, hour, minute, second;
  if (!read_digits(text, 0, 4, year) || text.size() < 5 || text[4] != '-' ||
      !read_digits(text, 5, 2, month) || text.size() < 8 || text[7] != '-' ||
      !read_digits(text, 8, 2, day))
    return not_rfc3339(text, "expected a yyyy-mm-dd date");
  if (text.size() < 11 || (text[10] != 'T' && text[10] != 't' && text[10] != ' '))
    return not_rfc3339(text, "expected 'T' after the date");
  if (!read_digits(text, 11, 2, hour) || text.size() < 14 || text[13] != ':' ||
      !read_digits(text, 14, 2, minute) || text.size() < 17 || text[16] != ':' ||
      !read_digits(text, 17, 2, second))
    return not_rfc3339(text, "expected a hh:mm:ss time after the date");

  if (month < 1 || month > 12) return not_rfc3339(text, fmt::format("month {}", month));
  if (day < 1 || day > 31) return not_rfc3339(text, fmt::format("day {}", day));
  if (const unsigned days = days_in_month(year, month); day > days)
    return not_rfc3339(text,
                       fmt::format("day {} but {:04}-{:02} has {} days", day, year, month, days));
  if (hour > 23) return not_rfc3339(text, fmt::format("hour {}", hour));
  if (minute > 59) return not_rfc3339(text, fmt::format("minute {}", minute));
  // Second 60 is a leap second. Epoch time has no place for it, so it reads
  // as the first second after it (what the arithmetic below does anyway);
  // which minute may hold one is decided by a table no parser has.
  if (second > 60) return not_rfc3339(text, fmt::format("second {}", second));

  size_t pos = 19;
  unsigned fraction_ms = 0;
  if (pos < text.size() && text[pos] == '.') {
    const size_t begin = ++pos;
    while (pos < text.size() && is_digit(text[pos])) {
      // Floored: digits past the millisecond are read and dropped. The
      // fraction always counts forward from the second, so this is a floor
      // before the epoch too.
      if (pos - begin < 3) fraction_ms = fraction_ms * 10 + static_cast<unsigned>(text[pos] - '0');
      ++pos;
    }
    const size_t digits = pos - begin;
    if (digits == 0) return not_rfc3339(text, "no digits after '.'");
    for (size_t k = digits; k < 3; ++k) fraction_ms *= 10;
  }

  if (pos == text.size()) return not_rfc3339(text, "no offset, add 'Z' or +hh:mm");
  int64_t offset_seconds = 0;
  if (text[pos] == 'Z' || text[pos] == 'z') {
    ++pos;
  } else if (text[pos] == '+' || text[pos] == '-') {
    unsigned offset_hour, offset_minute;
    if (!read_digits(text, pos + 1, 2, offset_hour) || pos + 3 >= text.size() ||
        text[pos + 3] != ':' || !read_digits(text, pos + 4, 2, offset_minute))
      return not_rfc3339(text, "expected an offset like +hh:mm");
    if (offset_hour > 23) return not_rfc3339(text, fmt::format("offset hour {}", offset_hour));
    if (offset_minute > 59)
      return not_rfc3339(text, fmt::format("offset minute {}", offset_minute));
    offset_seconds = offset_hour * 3600 + offset_minute * 60;
    if (text[pos] == '-') offset_seconds = -offset_seconds;
    pos += 6;
  } else {
    return not_rfc3339(text, "expected 'Z' or an offset like +hh:mm after the time");
  }
  if (pos != text.size()) return not_rfc3339(text, "unexpected characters after the offset");

  // Local time minus its offset is UTC.
  const int64_t seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 +
                          second - offset_seconds;
  return seconds * kSecond + fraction_ms;
}

void append_rfc3339(std::string& out, Millis t) {
  const Civil civil = civil_from_days(floor_div(t, kDay));
  const auto ms = static_cast<unsigned>(floor_mod(t, kDay));

  char buf[32];
  char* p = buf;
  if (civil.year >= 0 && civil.year <= 9999) {
    const auto y = static_cast<unsigned>(civil.year);
    p = write_2(p, y / 100);
    p = write_2(p, y % 100);
  } else {
    // Outside RFC 3339's four digits: ISO 8601's expanded year, so the output
    // still sorts and reads sensibly; parse_rfc3339 refuses it.
    p = fmt::format_to(p, "{:+05}", civil.year);
  }
  *p++ = '-';
  p = write_2(p, civil.month);
  *p++ = '-';
  p = write_2(p, civil.day);
  *p++ = 'T';
  p = write_2(p, ms / kHour);
  *p++ = ':';
  p = write_2(p, ms / kMinute % 60);
  *p++ = ':';
  p = write_2(p, ms / kSecond % 60);
  *p++ = '.';
  const unsigned frac = ms % 1000;
  *p++ = static_cast<char>('0' + frac / 100);
  p = write_2(p, frac % 100);
  *p++ = 'Z';
  out.append(buf, static_cast<size_t>(p - buf));
}

std::string format_rfc3339(Millis t) {
  std::string out;
  append_rfc3339(out, t);
  return out;
}

std::string_view time_unit_name(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSeconds:
      return "s";
    case TimeUnit::kMillis:
      return "ms";
    case TimeUnit::kMicros:
      return "us";
    case TimeUnit::kNanos:
      return "ns";
  }
  return "?";
}

Expected<TimeUnit> parse_time_unit(std::string_view text) {
  if (text == "s") return TimeUnit::kSeconds;
  if (text == "ms") return TimeUnit::kMillis;
  if (text == "us") return TimeUnit::kMicros;
  if (text == "ns") return TimeUnit::kNanos;
  return usage_error("unknown time unit {} (choices: s, ms, us, ns)", quoted(text));
}

Expected<Millis> epoch_to_millis(double value, TimeUnit unit) {
  if (!std::isfinite(value)) return data_error("time '{}' is not a finite number", value);
  double ms = value;
  switch (unit) {
    case TimeUnit::kSeconds:
      ms = value * 1e3;
      break;
    case TimeUnit::kMillis:
      break;
    case TimeUnit::kMicros:
      ms = value / 1e3;
      break;
    case TimeUnit::kNanos:
      ms = value / 1e6;
      break;
  }
  double floored = std::floor(ms);
  // A decimal like 1.005 s has no exact double: it arrives a hair below, and
  // the product lands an ulp or two under 1005. Such a product means the
  // integer above it, not the millisecond before.
  const double ulp = std::nextafter(std::fabs(ms), HUGE_VAL) - std::fabs(ms);
  if (floored != ms && floored + 1 - ms <= 2 * ulp) floored += 1;
  if (!(std::fabs(floored) <= static_cast<double>(kMaxExactMillis)))
    return out_of_range(fmt::format("{}", value), unit);
  return static_cast<Millis>(floored);
}

Expected<Millis> epoch_to_millis(int64_t value, TimeUnit unit) {
  Millis ms = 0;
  switch (unit) {
    case TimeUnit::kSeconds:
      if (__builtin_mul_overflow(value, kSecond, &ms))
        return out_of_range(fmt::format("{}", value), unit);
      break;
    case TimeUnit::kMillis:
      ms = value;
      break;
    case TimeUnit::kMicros:
      ms = floor_div(value, 1000);
      break;
    case TimeUnit::kNanos:
      ms = floor_div(value, 1000000);
      break;
  }
  if (ms > kMaxExactMillis || ms < -kMaxExactMillis)
    return out_of_range(fmt::format("{}", value), unit);
  return ms;
}

Expected<Millis> parse_time_point(std::string_view text, Millis now) {
  if (text == "now") return now;
  if (!text.empty() && text[0] == '-') {
    if (text.size() == 1) return usage_error("time '-' has no duration after the minus sign");
    auto d = parse_duration(text.substr(1));
    if (!d) return d.take_error();
    Millis t = 0;
    if (__builtin_sub_overflow(now, *d, &t))
      return usage_error("time {} is too far back", quoted(text));
    return t;
  }
  bool all_digits = !text.empty();
  for (char c : text) all_digits = all_digits && is_digit(c);
  if (all_digits) {
    Millis t = 0;
    for (char c : text) {
      if (__builtin_mul_overflow(t, 10, &t) || __builtin_add_overflow(t, c - '0', &t))
        return usage_error("time {} is too large for epoch milliseconds", quoted(text));
    }
    return t;
  }
  // Anything that starts like a date is judged as RFC 3339, so that a typo in
  // one gets the precise reason instead of the list of forms.
  if (text.size() >= 5 && is_digit(text[0]) && text[4] == '-') {
    auto t = parse_rfc3339(text);
    if (!t) return usage_error(t.take_error().message);
    return t;
  }
  return usage_error(
      "{} is not a time (write an RFC 3339 time, epoch milliseconds, 'now' or a duration ago like "
      "'-5m')",
      quoted(text));
}

Millis SystemClock::now() {
  using namespace std::chrono;
  return floor<milliseconds>(system_clock::now()).time_since_epoch().count();
}

Millis SystemClock::steady() {
  using namespace std::chrono;
  return floor<milliseconds>(steady_clock::now()).time_since_epoch().count();
}

void SystemClock::sleep_for(Millis d) {
  if (d > 0) std::this_thread::sleep_for(std::chrono::milliseconds(d));
}

}  // namespace kpipe
