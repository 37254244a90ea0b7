#include "kpipe/time.h"
#include "fakes.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <random>
#include <string>
#include <string_view>

// Expected epoch values come from GNU date (`date -u -d 2026-11-29T10:15:30.123Z +%s%3N`)
// or, before 1970 and for fractions, from Python's datetime; never from kpipe itself.

namespace kpipe {
namespace {

constexpr Millis kInt64Max = std::numeric_limits<int64_t>::max();
constexpr Millis kInt64Min = std::numeric_limits<int64_t>::min();
constexpr Millis k2Pow53 = Millis{1} << 53;

// Every diagnostic: one line, lower-case, the subject quoted, no final period.
void check_diagnostic(const Error& e) {
  INFO("message: " << e.message);
  REQUIRE_FALSE(e.message.empty());
  CHECK(e.message.find('\n') == std::string::npos);
  CHECK(e.message.find('\r') == std::string::npos);
  CHECK(e.message.back() != '.');
  CHECK_FALSE((e.message[0] >= 'A' && e.message[0] <= 'Z'));
  CHECK(e.message.find('\'') != std::string::npos);
}

Millis duration(std::string_view text) {
  auto d = parse_duration(text);
  INFO("duration: " << text);
  if (!d) FAIL("refused: " << d.error().message);
  return *d;
}

Error duration_error(std::string_view text) {
  auto d = parse_duration(text);
  INFO("duration: '" << text << "'");
  if (d) FAIL("accepted as " << *d);
  CHECK(d.error().status == ExitStatus::kUsage);
  check_diagnostic(d.error());
  return d.error();
}

Millis rfc3339(std::string_view text) {
  auto t = parse_rfc3339(text);
  INFO("time: " << text);
  if (!t) FAIL("refused: " << t.error().message);
  return *t;
}

Error rfc3339_error(std::string_view text) {
  auto t = parse_rfc3339(text);
  INFO("time: '" << text << "'");
  if (t) FAIL("accepted as " << *t);
  CHECK(t.error().status == ExitStatus::kDataError);
  check_diagnostic(t.error());
  return t.error();
}

Millis point(std::string_view text, Millis now) {
  auto t = parse_time_point(text, now);
  INFO("time point: " << text);
  if (!t) FAIL("refused: " << t.error().message);
  return *t;
}

Error point_error(std::string_view text, Millis now) {
  auto t = parse_time_point(text, now);
  INFO("time point: '" << text << "'");
  if (t) FAIL("accepted as " << *t);
  CHECK(t.error().status == ExitStatus::kUsage);
  check_diagnostic(t.error());
  return t.error();
}

Millis to_millis(double v, TimeUnit u) {
  auto t = epoch_to_millis(v, u);
  INFO("value: " << v);
  if (!t) FAIL("refused: " << t.error().message);
  return *t;
}

Millis to_millis(int64_t v, TimeUnit u) {
  auto t = epoch_to_millis(v, u);
  INFO("value: " << v);
  if (!t) FAIL("refused: " << t.error().message);
  return *t;
}

template <typename T>
Error to_millis_error(T v, TimeUnit u) {
  auto t = epoch_to_millis(v, u);
  INFO("value: " << v);
  if (t) FAIL("accepted as " << *t);
  CHECK(t.error().status == ExitStatus::kDataError);
  check_diagnostic(t.error());
  return t.error();
}

// An oracle independent of lib/kpipe/time.cpp: the C++20 calendar of
// <chrono> and snprintf, for years the calendar holds.
std::string oracle_rfc3339(Millis t, int offset_minutes = 0) {
  using namespace std::chrono;
  const sys_time<milliseconds> utc{milliseconds{t}};
  const auto local = utc + minutes{offset_minutes};
  const auto day = floor<days>(local);
  const year_month_day ymd{day};
  const hh_mm_ss<milliseconds> tod{local - day};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%03d", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(tod.hours().count()), static_cast<int>(tod.minutes().count()),
                static_cast<int>(tod.seconds().count()),
                static_cast<int>(tod.subseconds().count()));
  std::string out = buf;
  if (offset_minutes == 0) return out + "Z";
  const int a = std::abs(offset_minutes);
  std::snprintf(buf, sizeof buf, "%c%02d:%02d", offset_minutes < 0 ? '-' : '+', a / 60, a % 60);
  return out + buf;
}

constexpr Millis kYear0 = -62167219200000;      // 0000-01-01T00:00:00Z
constexpr Millis kYear10000 = 253402300800000;  // 10000-01-01T00:00:00Z
constexpr Millis kExample = 1795947330123;      // 2026-11-29T10:15:30.123Z

}  // namespace

// --- parse_duration ----------------------------------------------------------

TEST_CASE("parse_duration reads each unit", "[time][duration]") {
  CHECK(duration("250ms") == 250);
  CHECK(duration("30s") == 30'000);
  CHECK(duration("5m") == 300'000);
  CHECK(duration("2h") == 7'200'000);
  CHECK(duration("1d") == 86'400'000);
  CHECK(duration("1ms") == 1);
  CHECK(duration("007s") == 7'000);
}

TEST_CASE("parse_duration reads zero", "[time][duration]") {
  CHECK(duration("0") == 0);
  CHECK(duration("0s") == 0);
  CHECK(duration("0ms") == 0);
  CHECK(duration("0d") == 0);
  CHECK(duration("00s") == 0);
  CHECK(duration("0.0s") == 0);
}

TEST_CASE("parse_duration adds up sums", "[time][duration]") {
  CHECK(duration("1h30m") == 5'400'000);
  CHECK(duration("1m30s500ms") == 90'500);
  CHECK(duration("1d1h1m1s1ms") == 90'061'001);
  CHECK(duration("2d12h") == 216'000'000);
  CHECK(duration("1s1ms") == 1'001);
  // Any order, repeats add up.
  CHECK(duration("30m1h") == 5'400'000);
  CHECK(duration("1h1h") == 7'200'000);
  CHECK(duration("500ms1s") == 1'500);
}

TEST_CASE("parse_duration truncates decimals to the millisecond", "[time][duration]") {
  CHECK(duration("1.5s") == 1'500);
  CHECK(duration("0.5m") == 30'000);
  CHECK(duration("1.25h") == 4'500'000);
  CHECK(duration("0.1d") == 8'640'000);
  CHECK(duration("2.5d") == 216'000'000);
  CHECK(duration("1.5ms") == 1);
  CHECK(duration("0.9ms") == 0);
  CHECK(duration("0.0015s") == 1);
  CHECK(duration("0.0009s") == 0);
  CHECK(duration("1.9999s") == 1'999);
  CHECK(duration("1.5h30m") == 7'200'000);
  CHECK(duration("1.000000000000000000000000000001s") == 1'000);
}

TEST_CASE("parse_duration is exact for long fractions", "[time][duration]") {
  // 1 ms is 1/86400000 d = 0.0000000115740740740...d; checked with Python's
  // fractions: the digits above it floor to 1 ms, those below to 0.
  CHECK(duration("0.0000000115740741d") == 1);
  CHECK(duration("0.000000011574074d") == 0);
  CHECK(duration("0.0000000115740740740740740740740740740741d") == 1);
  CHECK(duration("0.0000000115740740740740740740740740740740d") == 0);
  CHECK(duration("0.99999999999999999999999999999999999999d") == 86'399'999);
}

TEST_CASE("parse_duration reaches the largest duration and no further", "[time][duration]") {
  CHECK(duration("9223372036854775807ms") == kInt64Max);
  CHECK(duration("106751991167d7h12m55s807ms") == kInt64Max);
  CHECK(duration("106751991d") == 106'751'991LL * 86'400'000);
  CHECK(duration_error("9223372036854775808ms").message ==
        "duration '9223372036854775808ms' is too large");
  duration_error("106751991168d");
  duration_error("106751991167d7h12m55s808ms");
  duration_error("9223372036854775807ms1ms");
  duration_error("99999999999999999999999999999s");
  duration_error("106751991167.9d");
}

TEST_CASE("parse_duration refuses a bare number", "[time][duration]") {
  CHECK(duration_error("30").message == "duration '30' has no unit (write 30s or 30ms)");
  CHECK(duration_error("1.5").message == "duration '1.5' has no unit (write 1.5s or 1.5ms)");
  CHECK(duration_error("00").message == "duration '00' has no unit (write 00s or 00ms)");
  CHECK(duration_error("1h30").message == "duration '1h30' has no unit after '30'");
  CHECK(duration_error("1m30s500").message == "duration '1m30s500' has no unit after '500'");
}

TEST_CASE("parse_duration refuses unknown units with the list or a suggestion",
          "[time][duration]") {
  CHECK(duration_error("5x").message ==
        "duration '5x' has unknown unit 'x' (units: ms, s, m, h, d)");
  CHECK(duration_error("5us").message ==
        "duration '5us' has unknown unit 'us' (units: ms, s, m, h, d)");
  CHECK(duration_error("1h5w").message ==
        "duration '1h5w' has unknown unit 'w' (units: ms, s, m, h, d)");
  CHECK(duration_error("5min").message ==
        "duration '5min' has unknown unit 'min', did you mean 'm'?");
  CHECK(duration_error("5S").message == "duration '5S' has unknown unit 'S', did you mean 's'?");
  CHECK(duration_error("5MS").message ==
        "duration '5MS' has unknown unit 'MS', did you mean 'ms'?");
  CHECK(duration_error("2hours").message ==
        "duration '2hours' has unknown unit 'hours', did you mean 'h'?");
  CHECK(duration_error("3sec").message ==
        "duration '3sec' has unknown unit 'sec', did you mean 's'?");
  CHECK(duration_error("1day").message ==
        "duration '1day' has unknown unit 'day', did you mean 'd'?");
  duration_error("5mss");
  duration_error("5hm");
}

TEST_CASE("parse_duration refuses negative, empty and malformed durations", "[time][duration]") {
  CHECK(duration_error("").message == "duration '' is empty (write e.g. 30s, 5m or 1h30m)");
  CHECK(duration_error("-5s").message == "duration '-5s' is negative");
  CHECK(duration_error("-0").message == "duration '-0' is negative");
  CHECK(duration_error("s").message == "duration 's' has a unit without a number before it");
  CHECK(duration_error("1hm").message ==
        "duration '1hm' has unknown unit 'hm' (units: ms, s, m, h, d)");
  CHECK(duration_error("+5s").message == "duration '+5s' has an unexpected '+'");
  CHECK(duration_error("1h 30m").message == "duration '1h 30m' has an unexpected ' '");
  CHECK(duration_error("5.s").message == "duration '5.s' has no digits after '.'");
  CHECK(duration_error(".5s").message == "duration '.5s' has an unexpected '.'");
  CHECK(duration_error("1.2.3s").message == "duration '1.2.3s' has an unexpected '.'");
  duration_error(" 5s");
  duration_error("5s ");
  duration_error("5 s");
  duration_error("5s,3m");
  duration_error("5s-3s");
  duration_error("1,5s");
  duration_error("1e3ms");
  duration_error("0x10s");
  duration_error("5s\n");
  duration_error(std::string_view("5\0s", 3));
}

TEST_CASE("duration diagnostics stay one line and short", "[time][duration]") {
  CHECK(duration_error("5\ns").message == "duration '5\\x0as' has an unexpected '\\x0a'");
  const std::string huge = "1" + std::string(500, 'h');
  const Error e = duration_error(huge);
  CHECK(e.message.size() < 200);
  CHECK(e.message.find("...'") != std::string::npos);
}

// --- format_duration ---------------------------------------------------------

TEST_CASE("format_duration writes the canonical form", "[time][duration]") {
  CHECK(format_duration(0) == "0s");
  CHECK(format_duration(1) == "1ms");
  CHECK(format_duration(250) == "250ms");
  CHECK(format_duration(1'000) == "1s");
  CHECK(format_duration(1'500) == "1s500ms");
  CHECK(format_duration(60'000) == "1m");
  CHECK(format_duration(5'400'000) == "1h30m");
  CHECK(format_duration(3'600'001) == "1h1ms");
  CHECK(format_duration(86'400'000) == "1d");
  CHECK(format_duration(172'800'000) == "2d");
  CHECK(format_duration(90'061'001) == "1d1h1m1s1ms");
  CHECK(format_duration(86'399'999) == "23h59m59s999ms");
  CHECK(format_duration(kInt64Max) == "106751991167d7h12m55s807ms");
}

TEST_CASE("format_duration writes negative durations with a minus sign", "[time][duration]") {
  CHECK(format_duration(-300'000) == "-5m");
  CHECK(format_duration(-1) == "-1ms");
  CHECK(format_duration(kInt64Min) == "-106751991167d7h12m55s808ms");
}

TEST_CASE("format_duration round-trips through parse_duration", "[time][duration]") {
  std::mt19937_64 rng(20261129);
  int checked = 0;
  for (Millis bound : {Millis{1'000}, kMinute, kDay, 1'000 * kDay, Millis{1} << 40, kInt64Max}) {
    std::uniform_int_distribution<Millis> dist(0, bound);
    for (int i = 0; i < 2'000; ++i) {
      const Millis d = dist(rng);
      const std::string text = format_duration(d);
      INFO("d = " << d << ", text = " << text);
      auto back = parse_duration(text);
      REQUIRE(back.ok());
      REQUIRE(*back == d);
      ++checked;
    }
  }
  for (Millis d : {Millis{0}, Millis{1}, Millis{999}, kSecond, kMinute - 1, kHour, kDay - 1, kDay,
                   kInt64Max, kInt64Max - 1}) {
    INFO("d = " << d);
    CHECK(duration(format_duration(d)) == d);
  }
  CHECK(checked == 12'000);
}

// --- parse_rfc3339 -----------------------------------------------------------

TEST_CASE("parse_rfc3339 reads known times", "[time][rfc3339]") {
  CHECK(rfc3339("2026-11-29T10:15:30.123Z") == kExample);
  CHECK(rfc3339("2026-11-29T12:15:30+02:00") == 1'795'947'330'000);
  CHECK(rfc3339("1970-01-01T00:00:00Z") == 0);
  CHECK(rfc3339("1970-01-01T00:00:00.001Z") == 1);
  CHECK(rfc3339("2038-01-19T03:14:08Z") == 2'147'483'648'000);
  CHECK(rfc3339("2016-12-31T23:59:59Z") == 1'483'228'799'000);
  CHECK(rfc3339("2100-02-28T00:00:00Z") == 4'107'456'000'000);
  CHECK(rfc3339("2100-03-01T00:00:00Z") == 4'107'542'400'000);
}

TEST_CASE("parse_rfc3339 reads times before the epoch", "[time][rfc3339]") {
  CHECK(rfc3339("1969-12-31T23:59:59Z") == -1'000);
  CHECK(rfc3339("1969-12-31T23:59:59.999Z") == -1);
  CHECK(rfc3339("1969-12-31T23:59:59.001Z") == -999);
  CHECK(rfc3339("1900-01-01T00:00:00Z") == -2'208'988'800'000);
  CHECK(rfc3339("1900-03-01T00:00:00Z") == -2'203'891'200'000);
  CHECK(rfc3339("1583-10-15T00:00:00Z") == -12'187'756'800'000);
  CHECK(rfc3339("1066-10-14T09:00:00Z") == -28'502'722'800'000);
  CHECK(rfc3339("1066-10-14T09:00:00.250Z") == -28'502'722'799'750);
  CHECK(rfc3339("1950-06-15T08:30:00.5Z") == -616'865'399'500);
}

TEST_CASE("parse_rfc3339 floors fractions before the epoch too", "[time][rfc3339]") {
  CHECK(rfc3339("1969-12-31T23:59:59.9995Z") == -1);
  CHECK(rfc3339("1969-12-31T23:59:59.999999999Z") == -1);
  CHECK(rfc3339("1969-12-31T23:59:59.0009Z") == -1'000);
  CHECK(rfc3339("1969-12-31T23:59:58.0001Z") == -2'000);
  CHECK(rfc3339("1970-01-01T00:00:00.0009Z") == 0);
}

TEST_CASE("parse_rfc3339 reads 0 to 9 fractional digits and more", "[time][rfc3339]") {
  const Millis base = 1'795'947'330'000;  // 2026-11-29T10:15:30Z
  CHECK(rfc3339("2026-11-29T10:15:30Z") == base);
  CHECK(rfc3339("2026-11-29T10:15:30.1Z") == base + 100);
  CHECK(rfc3339("2026-11-29T10:15:30.12Z") == base + 120);
  CHECK(rfc3339("2026-11-29T10:15:30.123Z") == base + 123);
  CHECK(rfc3339("2026-11-29T10:15:30.1234Z") == base + 123);
  CHECK(rfc3339("2026-11-29T10:15:30.12345Z") == base + 123);
  CHECK(rfc3339("2026-11-29T10:15:30.123456Z") == base + 123);
  CHECK(rfc3339("2026-11-29T10:15:30.1234567Z") == base + 123);
  CHECK(rfc3339("2026-11-29T10:15:30.12345678Z") == base + 123);
  CHECK(rfc3339("2026-11-29T10:15:30.123456789Z") == base + 123);
  CHECK(rfc3339("2026-11-29T10:15:30.999999999Z") == base + 999);
  CHECK(rfc3339("2026-11-29T10:15:30.99999999999999999999999Z") == base + 999);
  CHECK(rfc3339("2026-11-29T10:15:30.0Z") == base);
  CHECK(rfc3339("2026-11-29T10:15:30.000000000Z") == base);
  CHECK(rfc3339("2026-11-29T10:15:30.05Z") == base + 50);
  CHECK(rfc3339("2026-11-29T10:15:30.007Z") == base + 7);
  CHECK(rfc3339("2026-11-29T10:15:30.5+02:00") == base - 2 * kHour + 500);
  const std::string long_fraction = "2026-11-29T10:15:30." + std::string(10'000, '7') + "Z";
  CHECK(rfc3339(long_fraction) == base + 777);
}

TEST_CASE("parse_rfc3339 accepts each separator and zone spelling", "[time][rfc3339]") {
  for (const char* text :
       {"2026-11-29T10:15:30.123Z", "2026-11-29t10:15:30.123Z", "2026-11-29 10:15:30.123Z",
        "2026-11-29T10:15:30.123z", "2026-11-29t10:15:30.123z", "2026-11-29T10:15:30.123+00:00",
        "2026-11-29T10:15:30.123-00:00", "2026-11-29 10:15:30.123-00:00"}) {
    CHECK(rfc3339(text) == kExample);
  }
}

TEST_CASE("parse_rfc3339 subtracts the offset", "[time][rfc3339]") {
  CHECK(rfc3339("2026-01-01T00:00:00+14:00") == 1'767'175'200'000);
  CHECK(rfc3339("2026-01-01T00:00:00-12:00") == 1'767'268'800'000);
  CHECK(rfc3339("2026-01-01T00:00:00+05:30") == 1'767'205'800'000);
  CHECK(rfc3339("1970-01-01T00:00:00-00:01") == 60'000);
  CHECK(rfc3339("1970-01-01T00:00:00+00:01") == -60'000);
  CHECK(rfc3339("2026-11-30T00:15:30.123+14:00") == kExample);
  CHECK(rfc3339("2026-11-28T22:15:30.123-12:00") == kExample);
  CHECK(rfc3339("2026-11-29T15:45:30.123+05:30") == kExample);
  CHECK(rfc3339("2026-11-29T04:30:30.123-05:45") == kExample);
  CHECK(rfc3339("2026-11-30T10:14:30.123+23:59") == kExample);
  CHECK(rfc3339("2026-11-28T10:16:30.123-23:59") == kExample);
}

TEST_CASE("parse_rfc3339 validates leap days", "[time][rfc3339]") {
  CHECK(rfc3339("2024-02-29T00:00:00Z") == 1'709'164'800'000);
  CHECK(rfc3339("2000-02-29T12:00:00Z") == 951'825'600'000);
  CHECK(rfc3339("2400-02-29T00:00:00Z") == 13'574'563'200'000);
  CHECK(rfc3339("1600-02-29T00:00:00Z") == -11'670'998'400'000);
  CHECK(rfc3339("0000-02-29T00:00:00Z") == -62'162'121'600'000);
  CHECK(rfc3339("2023-02-28T00:00:00Z") + kDay == rfc3339("2023-03-01T00:00:00Z"));
  CHECK(rfc3339_error("2023-02-29T00:00:00Z").message ==
        "'2023-02-29T00:00:00Z' is not an RFC 3339 time (day 29 but 2023-02 has 28 days)");
  CHECK(rfc3339_error("1900-02-29T00:00:00Z").message ==
        "'1900-02-29T00:00:00Z' is not an RFC 3339 time (day 29 but 1900-02 has 28 days)");
  rfc3339_error("2100-02-29T00:00:00Z");
  rfc3339_error("2024-02-30T00:00:00Z");
}

TEST_CASE("parse_rfc3339 checks the days of each month", "[time][rfc3339]") {
  const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  for (int m = 1; m <= 12; ++m) {
    char last[32], past[32], next[32];
    std::snprintf(last, sizeof last, "2026-%02d-%02dT00:00:00Z", m, days[m - 1]);
    std::snprintf(past, sizeof past, "2026-%02d-%02dT00:00:00Z", m, days[m - 1] + 1);
    std::snprintf(next, sizeof next, "%d-%02d-01T00:00:00Z", m == 12 ? 2027 : 2026, m % 12 + 1);
    CHECK(rfc3339(last) + kDay == rfc3339(next));
    rfc3339_error(past);
  }
  CHECK(rfc3339_error("2026-04-31T00:00:00Z").message ==
        "'2026-04-31T00:00:00Z' is not an RFC 3339 time (day 31 but 2026-04 has 30 days)");
  CHECK(rfc3339_error("2026-01-32T00:00:00Z").message ==
        "'2026-01-32T00:00:00Z' is not an RFC 3339 time (day 32)");
  CHECK(rfc3339_error("2026-06-00T00:00:00Z").message ==
        "'2026-06-00T00:00:00Z' is not an RFC 3339 time (day 0)");
}

TEST_CASE("parse_rfc3339 checks the ranges of fields", "[time][rfc3339]") {
  CHECK(rfc3339_error("2026-13-01T00:00:00Z").message ==
        "'2026-13-01T00:00:00Z' is not an RFC 3339 time (month 13)");
  CHECK(rfc3339_error("2026-00-01T00:00:00Z").message ==
        "'2026-00-01T00:00:00Z' is not an RFC 3339 time (month 0)");
  CHECK(rfc3339_error("2026-11-29T24:00:00Z").message ==
        "'2026-11-29T24:00:00Z' is not an RFC 3339 time (hour 24)");
  CHECK(rfc3339_error("2026-11-29T10:60:00Z").message ==
        "'2026-11-29T10:60:00Z' is not an RFC 3339 time (minute 60)");
  CHECK(rfc3339_error("2026-11-29T10:15:61Z").message ==
        "'2026-11-29T10:15:61Z' is not an RFC 3339 time (second 61)");
  CHECK(rfc3339_error("2026-11-29T10:15:30+24:00").message ==
        "'2026-11-29T10:15:30+24:00' is not an RFC 3339 time (offset hour 24)");
  CHECK(rfc3339_error("2026-11-29T10:15:30+05:60").message ==
        "'2026-11-29T10:15:30+05:60' is not an RFC 3339 time (offset minute 60)");
  rfc3339_error("2026-99-99T99:99:99Z");
  CHECK(rfc3339("2026-11-29T23:59:59.999Z") + 1 == rfc3339("2026-11-30T00:00:00Z"));
}

TEST_CASE("parse_rfc3339 reads a leap second as the second after it", "[time][rfc3339]") {
  // 2016-12-31T23:59:60Z was the last leap second; 2017-01-01T00:00:00Z is 1483228800000.
  CHECK(rfc3339("2016-12-31T23:59:60Z") == 1'483'228'800'000);
  CHECK(rfc3339("2016-12-31T23:59:60.500Z") == 1'483'228'800'500);
  CHECK(rfc3339("2017-01-01T00:59:60+01:00") == 1'483'228'800'000);
  CHECK(rfc3339("2016-12-31T18:59:60-05:00") == 1'483'228'800'000);
}

TEST_CASE("parse_rfc3339 reads years 0000 to 9999", "[time][rfc3339]") {
  CHECK(rfc3339("0000-01-01T00:00:00Z") == kYear0);
  CHECK(rfc3339("0001-01-01T00:00:00Z") == -62'135'596'800'000);
  CHECK(rfc3339("0001-01-01T00:00:00.001Z") == -62'135'596'799'999);
  CHECK(rfc3339("0001-01-01T00:00:00+23:59") == -62'135'683'140'000);
  CHECK(rfc3339("0000-01-01T00:00:00+23:59") == -62'167'305'540'000);
  CHECK(rfc3339("9999-12-31T23:59:59.999Z") == 253'402'300'799'999);
  CHECK(rfc3339("9999-12-31T23:59:59.999-23:59") == 253'402'387'139'999);
  CHECK(rfc3339("9999-12-31T23:59:60Z") == kYear10000);
  rfc3339_error("10000-01-01T00:00:00Z");
  rfc3339_error("-0001-01-01T00:00:00Z");
  rfc3339_error("+2026-11-29T10:15:30Z");
}

TEST_CASE("parse_rfc3339 refuses every malformed form", "[time][rfc3339]") {
  CHECK(rfc3339_error("").message == "'' is not an RFC 3339 time (expected a yyyy-mm-dd date)");
  CHECK(rfc3339_error("2026-11-29").message ==
        "'2026-11-29' is not an RFC 3339 time (expected 'T' after the date)");
  CHECK(rfc3339_error("2026-11-29T10:15:30").message ==
        "'2026-11-29T10:15:30' is not an RFC 3339 time (no offset, add 'Z' or +hh:mm)");
  CHECK(rfc3339_error("2026-11-29T10:15:30.Z").message ==
        "'2026-11-29T10:15:30.Z' is not an RFC 3339 time (no digits after '.')");
  CHECK(rfc3339_error("2026-11-29T10:15").message ==
        "'2026-11-29T10:15' is not an RFC 3339 time (expected a hh:mm:ss time after the date)");
  CHECK(rfc3339_error("2026-11-29T10:15:30+0200").message ==
        "'2026-11-29T10:15:30+0200' is not an RFC 3339 time (expected an offset like +hh:mm)");
  CHECK(rfc3339_error("2026-11-29T10:15:30ZZ").message ==
        "'2026-11-29T10:15:30ZZ' is not an RFC 3339 time (unexpected characters after the offset)");
  CHECK(rfc3339_error("2026-11-29T10:15:30UTC").message ==
        "'2026-11-29T10:15:30UTC' is not an RFC 3339 time "
        "(expected 'Z' or an offset like +hh:mm after the time)");

  const char* const bad[] = {
      // missing parts
      "2",
      "2026",
      "2026-",
      "2026-11",
      "2026-11-",
      "2026-11-2",
      "2026-11-29T",
      "2026-11-29T10",
      "2026-11-29T10:",
      "2026-11-29T10:15:",
      "2026-11-29T10:15:3",
      "2026-11-29T10:15:30.",
      "2026-11-29T10:15:30.123",
      "2026-11-29T10:15:30+",
      "2026-11-29T10:15:30+02",
      "2026-11-29T10:15:30+02:",
      "2026-11-29T10:15:30+02:0",
      "T10:15:30Z",
      "2026-11-29Z",
      // short or long fields
      "26-11-29T10:15:30Z",
      "20261-11-29T10:15:30Z",
      "2026-1-29T10:15:30Z",
      "2026-11-9T10:15:30Z",
      "2026-11-29T1:15:30Z",
      "2026-11-29T10:5:30Z",
      "2026-11-29T10:15:3Z",
      "2026-111-29T10:15:30Z",
      "2026-11-29T10:15:300Z",
      "2026-11-29T10:15:30+2:00",
      "2026-11-29T10:15:30+002:00",
      // bad separators
      "2026/11/29T10:15:30Z",
      "2026-11/29T10:15:30Z",
      "2026-11-29X10:15:30Z",
      "2026-11-29_10:15:30Z",
      "2026-11-29  10:15:30Z",
      "2026-11-29T10-15-30Z",
      "2026-11-29T10:15-30Z",
      "2026-11-29T10.15.30Z",
      "2026-11-29T10:15:30,123Z",
      "2026-11-29T10:15:30+02-00",
      "2026-11-29T10:15:30*02:00",
      "20261129T101530Z",
      // trailing or leading junk
      " 2026-11-29T10:15:30Z",
      "2026-11-29T10:15:30Z ",
      "2026-11-29T10:15:30Z\n",
      "2026-11-29T10:15:30Zjunk",
      "2026-11-29T10:15:30+02:00Z",
      "2026-11-29T10:15:30+02:00:00",
      "2026-11-29T10:15:30.12a3Z",
      "2026-11-29T10:15:30.123 Z",
      // not digits
      "2O26-11-29T10:15:30Z",
      "2026-1a-29T10:15:30Z",
      "2026-11-29T1a:15:30Z",
      "2026-11-29T10:15:30+a2:00",
      "-026-11-29T10:15:30Z",
      "2026-+1-29T10:15:30Z",
      "now",
      "1795947330123",
  };
  for (const char* text : bad) rfc3339_error(text);
  rfc3339_error(std::string_view("2026-11-29T10:15:30Z\0", 21));
  rfc3339_error(std::string_view("2026-11-29T10:15:30\0Z", 21));
}

TEST_CASE("rfc3339 diagnostics stay one line and short", "[time][rfc3339]") {
  CHECK(rfc3339_error("2026-11-29T10:15:30Z\n").message ==
        "'2026-11-29T10:15:30Z\\x0a' is not an RFC 3339 time (unexpected characters after the "
        "offset)");
  const std::string huge = "2026-11-29T10:15:30Z" + std::string(1'000, 'x');
  const Error e = rfc3339_error(huge);
  CHECK(e.message.size() < 200);
  CHECK(e.message.find("...'") != std::string::npos);
  // A cut never splits a UTF-8 sequence: "é" is two bytes and starts at byte 63.
  const std::string accents = std::string(63, 'a') + "\xc3\xa9" + std::string(10, 'b');
  const Error u = rfc3339_error(accents);
  CHECK(u.message.rfind("'" + std::string(63, 'a') + "...'", 0) == 0);
}

// --- format_rfc3339 / append_rfc3339 -----------------------------------------

TEST_CASE("format_rfc3339 writes UTC with milliseconds", "[time][rfc3339]") {
  CHECK(format_rfc3339(0) == "1970-01-01T00:00:00.000Z");
  CHECK(format_rfc3339(1) == "1970-01-01T00:00:00.001Z");
  CHECK(format_rfc3339(kExample) == "2026-11-29T10:15:30.123Z");
  CHECK(format_rfc3339(1'795'947'330'000) == "2026-11-29T10:15:30.000Z");
  CHECK(format_rfc3339(1'795'947'330'050) == "2026-11-29T10:15:30.050Z");
  CHECK(format_rfc3339(1'709'164'800'000) == "2024-02-29T00:00:00.000Z");
  CHECK(format_rfc3339(951'782'400'000) == "2000-02-29T00:00:00.000Z");
  CHECK(format_rfc3339(4'107'542'400'000 - 1) == "2100-02-28T23:59:59.999Z");
  CHECK(format_rfc3339(2'147'483'648'000) == "2038-01-19T03:14:08.000Z");
}

TEST_CASE("format_rfc3339 writes times before the epoch", "[time][rfc3339]") {
  CHECK(format_rfc3339(-1) == "1969-12-31T23:59:59.999Z");
  CHECK(format_rfc3339(-999) == "1969-12-31T23:59:59.001Z");
  CHECK(format_rfc3339(-1'000) == "1969-12-31T23:59:59.000Z");
  CHECK(format_rfc3339(-1'001) == "1969-12-31T23:59:58.999Z");
  CHECK(format_rfc3339(-kDay) == "1969-12-31T00:00:00.000Z");
  CHECK(format_rfc3339(-kDay - 1) == "1969-12-30T23:59:59.999Z");
  CHECK(format_rfc3339(-616'865'399'500) == "1950-06-15T08:30:00.500Z");
  CHECK(format_rfc3339(-2'208'988'800'000) == "1900-01-01T00:00:00.000Z");
  CHECK(format_rfc3339(-2'203'891'200'000 - 1) == "1900-02-28T23:59:59.999Z");
  CHECK(format_rfc3339(-28'502'722'799'750) == "1066-10-14T09:00:00.250Z");
}

TEST_CASE("format_rfc3339 writes years 0000 to 9999 and signs the others", "[time][rfc3339]") {
  CHECK(format_rfc3339(-62'135'596'800'000) == "0001-01-01T00:00:00.000Z");
  CHECK(format_rfc3339(kYear0) == "0000-01-01T00:00:00.000Z");
  CHECK(format_rfc3339(-62'162'121'600'000) == "0000-02-29T00:00:00.000Z");
  CHECK(format_rfc3339(kYear0 - 1) == "-0001-12-31T23:59:59.999Z");
  CHECK(format_rfc3339(kYear10000 - 1) == "9999-12-31T23:59:59.999Z");
  CHECK(format_rfc3339(kYear10000) == "+10000-01-01T00:00:00.000Z");
  // Computed with Python's datetime shifted by 400-year cycles.
  CHECK(format_rfc3339(k2Pow53) == "+287396-10-12T08:59:00.992Z");
  CHECK(format_rfc3339(-k2Pow53) == "-283457-03-21T15:00:59.008Z");
  CHECK(format_rfc3339(kInt64Max) == "+292278994-08-17T07:12:55.807Z");
  CHECK(format_rfc3339(kInt64Min) == "-292275055-05-16T16:47:04.192Z");
}

TEST_CASE("append_rfc3339 appends", "[time][rfc3339]") {
  std::string out = "t=";
  append_rfc3339(out, kExample);
  out += ' ';
  append_rfc3339(out, -1);
  CHECK(out == "t=2026-11-29T10:15:30.123Z 1969-12-31T23:59:59.999Z");
}

TEST_CASE("format_rfc3339 agrees with <chrono> and round-trips", "[time][rfc3339]") {
  std::mt19937_64 rng(1795947330123);
  std::uniform_int_distribution<Millis> anywhen(kYear0, kYear10000 - 1);
  std::uniform_int_distribution<Millis> near_epoch(-3 * kDay, 3 * kDay);
  std::uniform_int_distribution<int> offset(-(23 * 60 + 59), 23 * 60 + 59);
  for (int i = 0; i < 20'000; ++i) {
    const Millis t = i % 4 == 0 ? near_epoch(rng) : anywhen(rng);
    const std::string text = format_rfc3339(t);
    INFO("t = " << t << ", text = " << text);
    REQUIRE(text == oracle_rfc3339(t));
    REQUIRE(rfc3339(text) == t);
    // The same instant written in some other zone, as a producer would.
    const int o = offset(rng);
    const std::string local = oracle_rfc3339(t, o);
    if (local[0] == '-' || local.size() > 29) continue;  // local year outside 0000-9999
    INFO("local = " << local);
    REQUIRE(rfc3339(local) == t);
  }
}

TEST_CASE("format_rfc3339 counts every day of a leap and a common year", "[time][rfc3339]") {
  // Day by day across 1999-2001 and 1899-1901 against <chrono>.
  for (Millis start : {Millis{915'148'800'000}, Millis{-2'240'524'800'000}}) {
    for (Millis t = start; t < start + 3 * 366 * kDay; t += kDay) {
      REQUIRE(format_rfc3339(t) == oracle_rfc3339(t));
      REQUIRE(format_rfc3339(t - 1) == oracle_rfc3339(t - 1));
    }
  }
}

// --- parse_time_unit ---------------------------------------------------------

TEST_CASE("parse_time_unit reads the four units", "[time][unit]") {
  CHECK(*parse_time_unit("s") == TimeUnit::kSeconds);
  CHECK(*parse_time_unit("ms") == TimeUnit::kMillis);
  CHECK(*parse_time_unit("us") == TimeUnit::kMicros);
  CHECK(*parse_time_unit("ns") == TimeUnit::kNanos);
}

TEST_CASE("parse_time_unit refuses others with the choices", "[time][unit]") {
  for (const char* text : {"", "S", "MS", "sec", "msec", "m", "µs", " s", "s "}) {
    auto u = parse_time_unit(text);
    INFO("unit: '" << text << "'");
    REQUIRE_FALSE(u.ok());
    CHECK(u.error().status == ExitStatus::kUsage);
    check_diagnostic(u.error());
    CHECK(u.error().message.find("(choices: s, ms, us, ns)") != std::string::npos);
  }
  CHECK(parse_time_unit("sec").error().message ==
        "unknown time unit 'sec' (choices: s, ms, us, ns)");
}

// --- epoch_to_millis ---------------------------------------------------------

TEST_CASE("epoch_to_millis converts integers and floors", "[time][epoch]") {
  CHECK(to_millis(int64_t{1}, TimeUnit::kSeconds) == 1'000);
  CHECK(to_millis(int64_t{-1}, TimeUnit::kSeconds) == -1'000);
  CHECK(to_millis(int64_t{1'795'947'330}, TimeUnit::kSeconds) == 1'795'947'330'000);
  CHECK(to_millis(kExample, TimeUnit::kMillis) == kExample);
  CHECK(to_millis(int64_t{-1}, TimeUnit::kMillis) == -1);
  CHECK(to_millis(int64_t{1'795'947'330'123'456}, TimeUnit::kMicros) == kExample);
  CHECK(to_millis(int64_t{999}, TimeUnit::kMicros) == 0);
  CHECK(to_millis(int64_t{1'000}, TimeUnit::kMicros) == 1);
  CHECK(to_millis(int64_t{-1}, TimeUnit::kMicros) == -1);
  CHECK(to_millis(int64_t{-1'000}, TimeUnit::kMicros) == -1);
  CHECK(to_millis(int64_t{-1'001}, TimeUnit::kMicros) == -2);
  CHECK(to_millis(int64_t{1'795'947'330'123'456'789}, TimeUnit::kNanos) == kExample);
  CHECK(to_millis(int64_t{1'999'999}, TimeUnit::kNanos) == 1);
  CHECK(to_millis(int64_t{-1}, TimeUnit::kNanos) == -1);
  CHECK(to_millis(int64_t{-1'000'000}, TimeUnit::kNanos) == -1);
  CHECK(to_millis(int64_t{-1'000'001}, TimeUnit::kNanos) == -2);
  CHECK(to_millis(kInt64Max, TimeUnit::kNanos) == 9'223'372'036'854);
  CHECK(to_millis(kInt64Min, TimeUnit::kNanos) == -9'223'372'036'855);
}

TEST_CASE("epoch_to_millis refuses integers beyond 2^53 ms", "[time][epoch]") {
  CHECK(to_millis(k2Pow53, TimeUnit::kMillis) == k2Pow53);
  CHECK(to_millis(-k2Pow53, TimeUnit::kMillis) == -k2Pow53);
  CHECK(to_millis(int64_t{9'007'199'254'740}, TimeUnit::kSeconds) == 9'007'199'254'740'000);
  CHECK(to_millis_error(k2Pow53 + 1, TimeUnit::kMillis).message ==
        "time '9007199254740993' (ms) is out of range (more than 2^53 ms from the epoch)");
  CHECK(to_millis_error(int64_t{9'007'199'254'741}, TimeUnit::kSeconds).message ==
        "time '9007199254741' (s) is out of range (more than 2^53 ms from the epoch)");
  to_millis_error(-k2Pow53 - 1, TimeUnit::kMillis);
  to_millis_error(kInt64Max, TimeUnit::kSeconds);
  to_millis_error(kInt64Min, TimeUnit::kSeconds);
  to_millis_error(kInt64Max, TimeUnit::kMillis);
  to_millis_error(kInt64Min, TimeUnit::kMicros);
  CHECK(to_millis_error(kInt64Max, TimeUnit::kMicros).message ==
        "time '9223372036854775807' (us) is out of range (more than 2^53 ms from the epoch)");
}

TEST_CASE("epoch_to_millis converts doubles and floors", "[time][epoch]") {
  CHECK(to_millis(1.5, TimeUnit::kSeconds) == 1'500);
  CHECK(to_millis(-1.5, TimeUnit::kSeconds) == -1'500);
  CHECK(to_millis(0.001, TimeUnit::kSeconds) == 1);
  CHECK(to_millis(-0.001, TimeUnit::kSeconds) == -1);
  CHECK(to_millis(-0.0005, TimeUnit::kSeconds) == -1);
  CHECK(to_millis(0.0005, TimeUnit::kSeconds) == 0);
  CHECK(to_millis(0.0, TimeUnit::kSeconds) == 0);
  CHECK(to_millis(-0.0, TimeUnit::kSeconds) == 0);
  CHECK(to_millis(1.9, TimeUnit::kMillis) == 1);
  CHECK(to_millis(-1.9, TimeUnit::kMillis) == -2);
  CHECK(to_millis(-0.1, TimeUnit::kMillis) == -1);
  CHECK(to_millis(0.9999, TimeUnit::kMillis) == 0);
  CHECK(to_millis(1795947330123.0, TimeUnit::kMillis) == kExample);
  CHECK(to_millis(-1.0, TimeUnit::kMicros) == -1);
  CHECK(to_millis(999.0, TimeUnit::kMicros) == 0);
  CHECK(to_millis(1000.0, TimeUnit::kMicros) == 1);
  CHECK(to_millis(-1001.0, TimeUnit::kMicros) == -2);
  CHECK(to_millis(1795947330123456.0, TimeUnit::kMicros) == kExample);
  CHECK(to_millis(1e6, TimeUnit::kNanos) == 1);
  CHECK(to_millis(-1.0, TimeUnit::kNanos) == -1);
  CHECK(to_millis(1795947330123456789.0, TimeUnit::kNanos) == kExample);
}

TEST_CASE("epoch_to_millis reads decimal seconds as written", "[time][epoch]") {
  // 1.005 has no exact double (it is 1.00499999999999989...), yet a producer
  // that wrote 1.005 meant 1005 ms.
  CHECK(to_millis(1.005, TimeUnit::kSeconds) == 1'005);
  CHECK(to_millis(-1.005, TimeUnit::kSeconds) == -1'005);
  CHECK(to_millis(1795947330.123, TimeUnit::kSeconds) == kExample);
  CHECK(to_millis(1795947330.1229, TimeUnit::kSeconds) == kExample - 1);
  CHECK(to_millis(-616865399.5, TimeUnit::kSeconds) == -616'865'399'500);
  // Every millisecond written as seconds with three decimals, near 0 and now.
  for (Millis base :
       {Millis{0}, Millis{-10'000}, Millis{1'795'947'330'000}, Millis{-616'865'400'000}}) {
    for (Millis k = base; k < base + 10'000; ++k) {
      char text[64];
      const Millis a = k < 0 ? -k : k;
      std::snprintf(text, sizeof text, "%s%lld.%03lld", k < 0 ? "-" : "",
                    static_cast<long long>(a / 1'000), static_cast<long long>(a % 1'000));
      INFO("text = " << text);
      REQUIRE(to_millis(std::strtod(text, nullptr), TimeUnit::kSeconds) == k);
      std::snprintf(text, sizeof text, "%lld000", static_cast<long long>(k));
      REQUIRE(to_millis(std::strtod(text, nullptr), TimeUnit::kMicros) == k);
    }
  }
}

TEST_CASE("epoch_to_millis refuses NaN, infinities and values beyond 2^53 ms", "[time][epoch]") {
  CHECK(to_millis_error(std::nan(""), TimeUnit::kMillis).message ==
        "time 'nan' is not a finite number");
  CHECK(to_millis_error(HUGE_VAL, TimeUnit::kSeconds).message ==
        "time 'inf' is not a finite number");
  CHECK(to_millis_error(-HUGE_VAL, TimeUnit::kNanos).message ==
        "time '-inf' is not a finite number");
  CHECK(to_millis(9007199254740992.0, TimeUnit::kMillis) == k2Pow53);
  CHECK(to_millis(-9007199254740992.0, TimeUnit::kMillis) == -k2Pow53);
  CHECK(to_millis_error(9007199254740994.0, TimeUnit::kMillis).message ==
        "time '9007199254740994' (ms) is out of range (more than 2^53 ms from the epoch)");
  CHECK(to_millis_error(1e300, TimeUnit::kSeconds).message ==
        "time '1e+300' (s) is out of range (more than 2^53 ms from the epoch)");
  to_millis_error(-9007199254740994.0, TimeUnit::kMillis);
  to_millis_error(9007199254741.0, TimeUnit::kSeconds);
  to_millis_error(1e19, TimeUnit::kMicros);
  to_millis_error(-1e300, TimeUnit::kNanos);
  to_millis_error(std::numeric_limits<double>::max(), TimeUnit::kSeconds);
}

// --- parse_time_point --------------------------------------------------------

TEST_CASE("parse_time_point reads each form", "[time][point]") {
  const Millis now = kExample;
  CHECK(point("now", now) == now);
  CHECK(point("0", now) == 0);
  CHECK(point("1709164800000", now) == 1'709'164'800'000);
  CHECK(point("9223372036854775807", now) == kInt64Max);
  CHECK(point("2024-02-29T00:00:00Z", now) == 1'709'164'800'000);
  CHECK(point("2026-11-29T12:15:30+02:00", now) == 1'795'947'330'000);
  CHECK(point("1969-12-31T23:59:59.999Z", now) == -1);
  CHECK(point("-5m", now) == now - 300'000);
  CHECK(point("-1h30m", now) == now - 5'400'000);
  CHECK(point("-1.5s", now) == now - 1'500);
  CHECK(point("-0", now) == now);
  CHECK(point("-1d", 0) == -kDay);
}

TEST_CASE("parse_time_point refuses other forms as usage errors", "[time][point]") {
  const Millis now = kExample;
  CHECK(point_error("yesterday", now).message ==
        "'yesterday' is not a time (write an RFC 3339 time, epoch milliseconds, 'now' or a "
        "duration ago like '-5m')");
  CHECK(point_error("-", now).message == "time '-' has no duration after the minus sign");
  CHECK(point_error("-5", now).message == "duration '5' has no unit (write 5s or 5ms)");
  CHECK(point_error("-5x", now).message ==
        "duration '5x' has unknown unit 'x' (units: ms, s, m, h, d)");
  CHECK(point_error("2026-13-01T00:00:00Z", now).message ==
        "'2026-13-01T00:00:00Z' is not an RFC 3339 time (month 13)");
  CHECK(point_error("2026-11-29", now).message ==
        "'2026-11-29' is not an RFC 3339 time (expected 'T' after the date)");
  CHECK(point_error("9223372036854775808", now).message ==
        "time '9223372036854775808' is too large for epoch milliseconds");
  CHECK(point_error("-1d", kInt64Min + 1).message == "time '-1d' is too far back");
  for (const char* text :
       {"", "Now", "NOW", " now", "now ", "+5m", "5m", "--5m", "- 5m", "1e12", "1709164800000.5",
        "-1709164800000", "0x10", "12 34", "@1709164800000"}) {
    point_error(text, now);
  }
}

// --- floor_div / floor_mod ---------------------------------------------------

TEST_CASE("floor_div and floor_mod round toward negative infinity", "[time][floor]") {
  CHECK(floor_div(7, 2) == 3);
  CHECK(floor_div(-7, 2) == -4);
  CHECK(floor_div(-8, 2) == -4);
  CHECK(floor_div(7, -2) == -4);
  CHECK(floor_div(-7, -2) == 3);
  CHECK(floor_mod(7, 2) == 1);
  CHECK(floor_mod(-7, 2) == 1);
  CHECK(floor_mod(-8, 2) == 0);
  CHECK(floor_mod(7, -2) == -1);
  CHECK(floor_mod(-7, -2) == -1);
  CHECK(floor_div(-1, kDay) == -1);
  CHECK(floor_mod(-1, kDay) == kDay - 1);
}

TEST_CASE("floor_mod does not overflow at the int64 minimum", "[time][floor]") {
  // floor_div(INT64_MIN, kDay) * kDay is below INT64_MIN; floor_mod once
  // computed it. 25975808 = 2^63 mod 86400000 subtracted from a day.
  CHECK(floor_div(kInt64Min, kDay) == -106'751'991'168);
  CHECK(floor_mod(kInt64Min, kDay) == kDay - 25'975'808);
  CHECK(floor_mod(kInt64Max, kDay) == 25'975'807);
  STATIC_REQUIRE(floor_mod(-1, 1000) == 999);
}

// --- clocks ------------------------------------------------------------------

TEST_CASE("SystemClock reads the system clocks in milliseconds", "[time][clock]") {
  SystemClock clock;
  const Millis before = static_cast<Millis>(std::time(nullptr)) * kSecond;
  const Millis now = clock.now();
  // time() reads the coarse clock, which may trail the precise one by a
  // tick (4 ms at HZ=250): now may be past the second it says.
  const Millis after = static_cast<Millis>(std::time(nullptr)) * kSecond + kSecond + 20;
  CHECK(now >= before);
  CHECK(now < after);
  CHECK(now > rfc3339("2020-01-01T00:00:00Z"));
  const Millis s1 = clock.steady();
  const Millis s2 = clock.steady();
  CHECK(s2 >= s1);
  // The one clock whose pause is real (the Kafka clients' retries).
  clock.sleep_for(2);
  CHECK(clock.steady() >= s2 + 2);
  clock.sleep_for(0);
  clock.sleep_for(-1);
}

TEST_CASE("FakeClock moves only when told", "[time][clock]") {
  FakeClock clock(kExample);
  CHECK(clock.now() == kExample);
  CHECK(clock.steady() == 0);
  clock.advance(5 * kSecond);
  CHECK(clock.now() == kExample + 5'000);
  CHECK(clock.steady() == 5'000);
  clock.set(0);
  CHECK(clock.now() == 0);
  CHECK(clock.steady() == 5'000);
  Clock& base = clock;
  CHECK(base.now() == 0);
  // A pause passes at once, moving both clocks.
  base.sleep_for(100);
  CHECK(clock.now() == 100);
  CHECK(clock.steady() == 5'100);
  base.sleep_for(0);
  base.sleep_for(-5);
  CHECK(clock.steady() == 5'100);
}

}  // namespace kpipe
