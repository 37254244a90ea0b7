#include "kpipe/event_time.h"

#include <cmath>

namespace kpipe {

Expected<Millis> read_event_time(const JsonField& field, std::string_view path, TimeUnit unit,
                                 const TimeFieldWording& wording) {
  Expected<Millis> t = Millis{0};
  switch (field.type) {
    case JsonType::kMissing:
      return data_error("field '{}' is missing", path);
    case JsonType::kNumber:
      // A number kept as text only (kpipe(7), LINES) is no time.
      if (!field.is_integer && !std::isfinite(field.number))
        return data_error("field '{}' is {}, outside the range of a double", path, field.raw);
      t = field.is_integer ? epoch_to_millis(field.integer, unit)
                           : epoch_to_millis(field.number, unit);
      break;
    case JsonType::kString:
      t = parse_rfc3339(field.str);
      break;
    default:
      return data_error("field '{}' is {}, not {}", path, json_type_phrase(field.type),
                        wording.expected);
  }
  // A time that RFC 3339 cannot write (a number far from the epoch, an
  // offset or a leap second that crosses year 0 or 9999) would come out as
  // a time that no program reads back (kpipe(7), TIMES AND DURATIONS).
  if (t && (*t < kMinTime || *t > kMaxTime)) {
    std::string shown = field.type == JsonType::kString
                            ? fmt::format("'{}'", field.str)
                            : fmt::format("'{}' ({})", field.raw, time_unit_name(unit));
    t = data_error(
        "time {} is outside RFC 3339's range, 0000-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z",
        shown);
  }
  if (t) return t;
  if (wording.says_not_a_time)
    return data_error("field '{}' is not a time: {}", path, t.error().message);
  return data_error("field '{}': {}", path, t.error().message);
}

}  // namespace kpipe
