// kdlq guard: the pipeline's door. Passes a record on byte for byte when it
// is valid JSON as a whole and holds every required field with the right
// type; refuses it otherwise, with the reason, so that --on-error sends it
// to the dead-letter store. Pure: JSON and time only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kpipe/json.h"
#include "kpipe/status.h"

namespace kpipe {

enum class FieldType { kAny, kString, kNumber, kInteger, kBool, kObject, kArray, kTime };

const char* field_type_name(FieldType t);

// --require PATH[:TYPE]: a field that must be present and not null, and of
// TYPE when one is given. The type is what follows the last ':' when that
// is a lower-case word; a path whose last segment holds a ':' is quoted
// (."a:b").
struct Requirement {
  FieldPath path;
  FieldType type = FieldType::kAny;
};
Expected<Requirement> parse_requirement(std::string_view text);

class Guard {
 public:
  explicit Guard(std::vector<Requirement> requirements);

  // ok, or a data_error with the reason: the line's JSON fault, or the
  // first requirement (in the order given) that it breaks.
  // `line` must be followed by kJsonPadding readable bytes.
  Status check(std::string_view line);

 private:
  Status check_field(const Requirement& r, const JsonField& f);
  Error explain_missing(size_t index, std::string_view line);

  std::vector<Requirement> requirements_;
  JsonValidator validator_;
  JsonReader reader_;
  FieldSet fields_;
  std::vector<JsonField> values_;
  // Only on the error path: the proper prefixes of each requirement's path,
  // to say that `.value` is a string rather than that `.value.ts` is missing.
  JsonReader explain_reader_;
  std::vector<FieldSet> prefixes_;
  std::vector<JsonField> prefix_values_;
  bool needs_object_ = false;
};

}  // namespace kpipe
