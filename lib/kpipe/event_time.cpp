#include "kpipe/event_time.h"

namespace kpipe {

Expected<Millis> read_event_time(const JsonField& field, std::string_view path, TimeUnit unit,
                                 const TimeFieldWording& wording) {
  Expected<Millis> t = Millis{0};
  switch (field.type) {
    case JsonType::kMissing:
      return data_error("field '{}' is missing", path);
    case JsonType::kNumber:
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
  if (t) return t;
  if (wording.says_not_a_time)
    return data_error("field '{}' is not a time: {}", path, t.error().message);
  return data_error("field '{}': {}", path, t.error().message);
}

}  // namespace kpipe
