// Times and durations (kpipe/time.h): every duration that parses formats
// to a text that parses back to it, every RFC 3339 time that parses
// formats and parses back to it, and the same for command-line time points.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "kpipe/time.h"

using kpipe::Millis;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kpipe::fuzz::ExactInput input(data, size);
  const std::string_view text = input.view();

  if (auto d = kpipe::parse_duration(text)) {
    FUZZ_CHECK(*d >= 0);
    const std::string formatted = kpipe::format_duration(*d);
    auto again = kpipe::parse_duration(formatted);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(*again == *d);
    FUZZ_CHECK(kpipe::format_duration(*again) == formatted);
  }

  if (auto t = kpipe::parse_rfc3339(text)) {
    // Years 0000-9999 with offsets up to a day and a leap second may land
    // just outside; within the range the text written reads back.
    if (*t >= kpipe::kMinTime && *t <= kpipe::kMaxTime) {
      const std::string formatted = kpipe::format_rfc3339(*t);
      auto again = kpipe::parse_rfc3339(formatted);
      FUZZ_CHECK(again.ok());
      FUZZ_CHECK(*again == *t);
    }
  }

  constexpr Millis kNow = 1'764'000'000'000;
  if (auto p = kpipe::parse_time_point(text, kNow)) {
    // A time point written as epoch milliseconds reads back.
    if (*p >= 0) {
      auto again = kpipe::parse_time_point(std::to_string(*p), kNow);
      FUZZ_CHECK(again.ok() && *again == *p);
    }
  }

  if (auto unit = kpipe::parse_time_unit(text)) {
    auto again = kpipe::parse_time_unit(kpipe::time_unit_name(*unit));
    FUZZ_CHECK(again.ok() && *again == *unit);
  }

  // Epoch conversion from the input's first 8 bytes, as a number.
  if (size >= 9) {
    int64_t v = 0;
    std::memcpy(&v, data + 1, sizeof v);
    const auto unit = static_cast<kpipe::TimeUnit>(data[0] % 4);
    if (auto ms = kpipe::epoch_to_millis(v, unit)) {
      // Floored: v in unit lies in [ms, ms + 1) milliseconds.
      FUZZ_CHECK(*ms >= -(int64_t{1} << 53) - 1 && *ms <= (int64_t{1} << 53));
    }
    double dv = 0;
    std::memcpy(&dv, data + 1, sizeof dv);
    (void)kpipe::epoch_to_millis(dv, unit);
  }
  return 0;
}
