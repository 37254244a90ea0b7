// Event times, durations and clocks (kpipe(7), TIMES AND DURATIONS). Pure: no system clock is
// read here except through a Clock, so engines and their tests inject time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kpipe/status.h"

namespace kpipe {

// Milliseconds since the Unix epoch, or a duration in milliseconds.
using Millis = int64_t;

constexpr Millis kSecond = 1000;
constexpr Millis kMinute = 60 * kSecond;
constexpr Millis kHour = 60 * kMinute;
constexpr Millis kDay = 24 * kHour;

// The times RFC 3339 can write, 0000-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z:
// the event times programs accept (event_time.h), so that every time they
// write reads back.
constexpr Millis kMinTime = -62'167'219'200'000;
constexpr Millis kMaxTime = 253'402'300'799'999;

// "250ms", "30s", "5m", "2h", "1d", sums like "1h30m" (in any order), decimals
// like "1.5s" (truncated to the millisecond). A bare number is refused as
// ambiguous ("0" excepted), and so are negative durations and overflow.
// Errors are usage errors: durations come from command lines.
Expected<Millis> parse_duration(std::string_view text);

// The canonical form that parse_duration reads back: largest units first,
// zero parts left out: "1h30m", "250ms", "0s". A negative duration gets a
// leading '-' (as parse_time_point reads it: "-5m").
std::string format_duration(Millis d);

// RFC 3339 (also the "T"/"t"/space separator, "Z"/"z", +hh:mm offsets,
// any number of fractional digits, floored to the millisecond), years
// 0000-9999. Second 60 (a leap second) is accepted and reads as the second
// after it: 23:59:60Z is 00:00:00Z of the next day. Errors are data errors:
// the text comes from records.
Expected<Millis> parse_rfc3339(std::string_view text);

// "2026-11-29T10:15:30.123Z": UTC, always three fractional digits. Years
// outside 0000-9999 are written with a sign ("-0001-...", "+10000-..."), which
// is ISO 8601's expanded form, not RFC 3339.
void append_rfc3339(std::string& out, Millis t);
std::string format_rfc3339(Millis t);

enum class TimeUnit { kSeconds, kMillis, kMicros, kNanos };
Expected<TimeUnit> parse_time_unit(std::string_view text);  // "s", "ms", "us", "ns"
std::string_view time_unit_name(TimeUnit unit);

// A numeric event time in `unit` to epoch milliseconds, floored (so -1 us is
// -1 ms). Refuses NaN, infinities and values outside +-2^53 ms.
Expected<Millis> epoch_to_millis(double value, TimeUnit unit);
Expected<Millis> epoch_to_millis(int64_t value, TimeUnit unit);

// A point in time given on a command line (--from @T, --since, --until,
// --to-datetime): RFC 3339, epoch milliseconds as digits, "now", or a
// duration before `now` written with a minus sign ("-5m").
Expected<Millis> parse_time_point(std::string_view text, Millis now);

// Floor division and modulo for window alignment of negative times.
constexpr Millis floor_div(Millis a, Millis b) {
  Millis q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
// Not a - floor_div(a, b) * b: that product overflows near the int64 minimum.
constexpr Millis floor_mod(Millis a, Millis b) {
  Millis r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// The outside world's time, injected so that tests never sleep.
class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time, epoch milliseconds.
  virtual Millis now() = 0;
  // Monotonic milliseconds for intervals and timeouts.
  virtual Millis steady() = 0;
  // Lets `d` pass before asking again (a retry's pause): a fake clock
  // advances its time instead of sleeping.
  virtual void sleep_for(Millis d) = 0;
};

class SystemClock final : public Clock {
 public:
  Millis now() override;
  Millis steady() override;
  void sleep_for(Millis d) override;
};

}  // namespace kpipe
