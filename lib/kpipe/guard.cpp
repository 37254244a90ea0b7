#include "kpipe/guard.h"

#include <charconv>
#include <cstdint>

#include "kpipe/choices.h"
#include "kpipe/event_time.h"
#include "kpipe/time.h"

namespace kpipe {

namespace {

const std::vector<std::string> kTypeNames = {"string", "number", "integer", "bool",
                                             "object", "array",  "time"};

// "a string", "an integer": for reasons.
std::string with_article(std::string_view noun) {
  bool vowel = !noun.empty() && std::string_view("aeiou").find(noun[0]) != std::string_view::npos;
  return fmt::format("{} {}", vowel ? "an" : "a", noun);
}

bool is_type_word(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < 'a' || c > 'z') return false;
  return true;
}

// The first `n` steps of `path`, written so that FieldPath::parse reads
// them back: as a JSON Pointer when the path was one, else in dot form.
std::string prefix_text(const FieldPath& path, size_t n) {
  std::string out;
  bool pointer = !path.text().empty() && path.text()[0] == '/';
  for (size_t i = 0; i < n; ++i) {
    const PathStep& s = path.steps()[i];
    if (pointer) {
      out.push_back('/');
      for (char c : s.key) {
        if (c == '~') {
          out.append("~0");
        } else if (c == '/') {
          out.append("~1");
        } else {
          out.push_back(c);
        }
      }
      continue;
    }
    if (!s.has_key) {
      out.append(fmt::format("[{}]", s.index));
      continue;
    }
    append_path_key(out, s.key);
  }
  return out;
}

// Whether a JSON number's text is an integer, read from the text itself so
// that it is exact at any size: 1e3, 10e-1 and 123456789012345678901.0 are,
// 0.1 and 12345678901234567890.5 (a whole number once read as a double) are not.
bool is_integral(std::string_view number) {
  size_t e = number.find_first_of("eE");
  std::string_view mantissa = number.substr(0, e);
  if (!mantissa.empty() && mantissa[0] == '-') mantissa.remove_prefix(1);
  size_t dot = mantissa.find('.');
  std::string_view whole = mantissa.substr(0, dot);
  std::string_view fraction;
  if (dot != std::string_view::npos) fraction = mantissa.substr(dot + 1);
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  // The value is DIGITS * 10^scale, DIGITS being whole and fraction joined.
  int64_t exponent = 0;
  if (e != std::string_view::npos) {
    std::string_view text = number.substr(e + 1);
    if (!text.empty() && text[0] == '+') text.remove_prefix(1);
    auto r = std::from_chars(text.data(), text.data() + text.size(), exponent);
    // An exponent beyond 64 bits: past any digit count a line can hold.
    if (r.ec != std::errc()) exponent = text[0] == '-' ? INT64_MIN / 2 : INT64_MAX / 2;
  }
  int64_t scale = exponent - static_cast<int64_t>(fraction.size());
  if (scale >= 0) return true;
  // Trailing zeros of DIGITS make up for a negative scale; zero is an integer.
  std::string digits = std::string(whole) + std::string(fraction);
  size_t last = digits.find_last_not_of('0');
  if (last == std::string::npos) return true;
  return static_cast<int64_t>(digits.size() - 1 - last) + scale >= 0;
}

}  // namespace

const char* field_type_name(FieldType t) {
  switch (t) {
    case FieldType::kAny:
      return "any";
    case FieldType::kString:
      return "string";
    case FieldType::kNumber:
      return "number";
    case FieldType::kInteger:
      return "integer";
    case FieldType::kBool:
      return "bool";
    case FieldType::kObject:
      return "object";
    case FieldType::kArray:
      return "array";
    case FieldType::kTime:
      return "time";
  }
  return "?";
}

Expected<Requirement> parse_requirement(std::string_view text) {
  Requirement r;
  std::string_view path = text;
  size_t colon = text.rfind(':');
  if (colon != std::string_view::npos && is_type_word(text.substr(colon + 1))) {
    auto type = parse_choice("type", text.substr(colon + 1), kTypeNames);
    if (!type) return usage_error("--require '{}': {}", text, type.error().message);
    r.type = static_cast<FieldType>(*type + 1);
    path = text.substr(0, colon);
  }
  auto parsed = FieldPath::parse(path);
  if (!parsed) return usage_error("--require '{}': {}", text, parsed.error().message);
  if (parsed->steps().empty()) return usage_error("--require '{}': the path names no field", text);
  r.path = std::move(*parsed);
  return r;
}

Guard::Guard(std::vector<Requirement> requirements) : requirements_(std::move(requirements)) {
  for (const Requirement& r : requirements_) {
    fields_.add(r.path);
    FieldSet prefixes;
    for (size_t n = 1; n < r.path.steps().size(); ++n) {
      auto p = FieldPath::parse(prefix_text(r.path, n));
      if (p) prefixes.add(*p);
    }
    prefixes_.push_back(std::move(prefixes));
    if (r.path.steps()[0].has_key && !r.path.steps()[0].has_index) needs_object_ = true;
  }
}

Status Guard::check(std::string_view line) {
  // Whole-line validation first: a filter checks only what it reads, but a
  // guard stands where malformed records must stop.
  KPIPE_TRY(validator_.check(line));
  KPIPE_TRY(reader_.read(line, fields_, values_));
  if (needs_object_ && reader_.root_type() != JsonType::kObject)
    return data_error("the line is {}, not an object", json_type_phrase(reader_.root_type()));
  for (size_t i = 0; i < requirements_.size(); ++i) {
    const JsonField& f = values_[i];
    if (f.type == JsonType::kMissing) return explain_missing(i, line);
    KPIPE_TRY(check_field(requirements_[i], f));
  }
  return {};
}

Status Guard::check_field(const Requirement& r, const JsonField& f) {
  const std::string& name = r.path.text();
  if (f.type == JsonType::kNull) {
    if (r.type == FieldType::kAny) return data_error("field '{}' is null", name);
    return data_error("field '{}' is null, not {}", name, with_article(field_type_name(r.type)));
  }
  auto wrong = [&] {
    return data_error("field '{}' is {}, not {}", name, json_type_phrase(f.type),
                      with_article(field_type_name(r.type)));
  };
  switch (r.type) {
    case FieldType::kAny:
      return {};
    case FieldType::kString:
      return f.type == JsonType::kString ? Status() : wrong();
    case FieldType::kNumber:
      return f.type == JsonType::kNumber ? Status() : wrong();
    case FieldType::kBool:
      return f.type == JsonType::kBool ? Status() : wrong();
    case FieldType::kObject:
      return f.type == JsonType::kObject ? Status() : wrong();
    case FieldType::kArray:
      return f.type == JsonType::kArray ? Status() : wrong();
    case FieldType::kInteger:
      if (f.type != JsonType::kNumber) return wrong();
      // JSON Schema's reading: 3.0 is an integer, 3.5 is not.
      if (f.is_integer || is_integral(f.raw)) return {};
      return data_error("field '{}' is {}, not an integer", name, f.raw.substr(0, 40));
    case FieldType::kTime: {
      // A guard has no --time-unit: numbers are epoch milliseconds, as
      // kpipe(7) says times are by default.
      static constexpr TimeFieldWording kWording{.expected = "a time", .says_not_a_time = true};
      return read_event_time(f, name, TimeUnit::kMillis, kWording).status();
    }
  }
  return {};
}

Error Guard::explain_missing(size_t index, std::string_view line) {
  const Requirement& r = requirements_[index];
  const FieldSet& prefixes = prefixes_[index];
  if (prefixes.size() > 0 && explain_reader_.read(line, prefixes, prefix_values_).ok()) {
    // The deepest prefix present: if it cannot hold the next step, say so.
    for (size_t n = prefixes.size(); n-- > 0;) {
      const JsonField& f = prefix_values_[n];
      if (f.type == JsonType::kMissing) continue;
      const PathStep& next = r.path.steps()[n + 1];
      bool holds = (f.type == JsonType::kObject && next.has_key) ||
                   (f.type == JsonType::kArray && next.has_index);
      if (holds) break;
      return data_error("field '{}' is {}, not {}", prefixes.path(n).text(),
                        json_type_phrase(f.type), next.has_key ? "an object" : "an array");
    }
  }
  return data_error("field '{}' is missing", r.path.text());
}

}  // namespace kpipe
