// JSON for the NDJSON hot path: field paths (kpipe(7), FIELD PATHS) compiled once and
// read in one pass over each line with simdjson's ondemand parser, and the
// small writers that build output without re-serialising what they embed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/status.h"

namespace kpipe {

enum class JsonType : uint8_t { kMissing, kNull, kBool, kNumber, kString, kObject, kArray };

// The type as a message says it: "a string", "an object", "null".
const char* json_type_phrase(JsonType t);

// One step of a field path: an object key, an array index, or (from a JSON
// Pointer, where "/0" may mean either) both.
struct PathStep {
  std::string key;
  uint64_t index = 0;
  bool has_key = true;
  bool has_index = false;
};

// `.value.user_id`, `value.user_id`, `.items[0].sku`, `."dotted.name"`, or an
// RFC 6901 JSON Pointer such as `/value/user_id`. "." is the whole line.
class FieldPath {
 public:
  static Expected<FieldPath> parse(std::string_view text);

  const std::string& text() const { return text_; }
  const std::vector<PathStep>& steps() const { return steps_; }
  // The last object key on the path ("amount" for `.value.amount`), used to
  // name outputs; empty when the path ends in an index or is the root.
  std::string last_key() const;

 private:
  std::string text_;
  std::vector<PathStep> steps_;
};

// The value found at a path. Views point into the line or into the reader's
// own buffers, and stay valid until the reader reads the next line.
struct JsonField {
  // The value's JSON text as it appears in the line (objects and arrays may
  // hold insignificant whitespace: see minify_json).
  std::string_view raw;
  std::string_view str;  // kString: the unescaped string
  int64_t integer = 0;   // kNumber with is_integer
  // kNumber, always set. Every valid JSON number is read, whatever its
  // size: one beyond 64 bits is not is_integer and reads as the nearest
  // double (as in jq); one beyond a double's range (1e400) as an
  // infinity. Its text in `raw` is exact: a program that passes it on
  // uses that, and one that must compute with it refuses a non-finite one.
  double number = 0;
  JsonType type = JsonType::kMissing;
  bool is_integer = false;  // within 64-bit signed integers
  bool boolean = false;     // kBool
};

// A set of paths read together: paths sharing a prefix are walked once.
class FieldSet {
 public:
  FieldSet();
  ~FieldSet();
  FieldSet(FieldSet&&) noexcept;
  FieldSet& operator=(FieldSet&&) noexcept;

  // Returns the slot that JsonReader::read fills for this path.
  size_t add(const FieldPath& path);
  size_t size() const { return paths_.size(); }
  const FieldPath& path(size_t slot) const { return paths_[slot]; }

  struct Node;
  const std::vector<Node>& nodes() const;
  // Slots whose path repeats an earlier one: {earlier slot, later slot}.
  const std::vector<std::pair<size_t, size_t>>& aliases() const { return aliases_; }

 private:
  std::vector<FieldPath> paths_;
  std::unique_ptr<std::vector<Node>> nodes_;
  std::vector<std::pair<size_t, size_t>> aliases_;
};

// A top-level member of an object line, as JsonReader::read_members gives it.
struct JsonMember {
  std::string_view key;  // unescaped
  JsonField value;
};

// Parses lines with one reused ondemand parser. Every line is checked as far
// as it is read: its encoding, the structure of its top level and of every
// object or array on a path, and every value read; an object or array read
// as a field's value is checked whole, at the cost of a second parse of its
// text (kpipe(7), LINES). A value that no path reaches is skipped by bracket
// counting, so a malformed nested value that no program reads can pass
// through a filter unchanged.
class JsonReader {
 public:
  JsonReader();
  ~JsonReader();
  JsonReader(const JsonReader&) = delete;
  JsonReader& operator=(const JsonReader&) = delete;

  // `line` must be followed by kJsonPadding readable bytes (Line from
  // LineFeed is). Fills `out` with one JsonField per slot of `fields`;
  // a path that leads nowhere gives kMissing. Fails with a data_error whose
  // message is the reason, named as the user would ("not valid JSON:
  // unclosed string", "... 'nul' is not a JSON value", "... content after
  // the value"): simdjson's coarser codes get a second, slow reading of
  // the refused line, never of a good one.
  Status read(std::string_view line, const FieldSet& fields, std::vector<JsonField>& out);
  // The same into `out[0 .. fields.size())`.
  Status read(std::string_view line, const FieldSet& fields, JsonField* out);

  // Every member of an object line, in order (a repeated key appears each
  // time), for programs whose fields are the data's own (kupsert's
  // columns). Views live as long as read()'s. A line that is not an
  // object is a data_error, and so is one with a malformed object or
  // array member: what this gives is the whole line, checked whole.
  Status read_members(std::string_view line, std::vector<JsonMember>& out);

  // The type of the line's top-level value, after read().
  JsonType root_type() const { return root_type_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  JsonType root_type_ = JsonType::kMissing;
};

// Whether a line is a control line (kpipe(7), CONTROL LINES AND CHECKPOINTS): an object whose first
// key is "$kpipe". Cheap: looks at the first bytes only.
bool is_control_line(std::string_view line);

// A parsed JSON value that owns its data, for the few places off the hot
// path that need a whole tree (control lines, envelope headers, files).
struct JsonValue {
  // Declared, not implied: clang with libstdc++ asks whether a JsonValue is
  // default-constructible while `members` names pair<string, JsonValue>,
  // before the type is complete (the fuzz build, tests/fuzz/, uses clang).
  JsonValue() noexcept {}

  JsonType type = JsonType::kNull;
  bool boolean = false;
  bool is_integer = false;
  int64_t integer = 0;
  double number = 0;
  std::string str;               // kString; for kNumber, the number's text
  std::vector<JsonValue> items;  // kArray
  std::vector<std::pair<std::string, JsonValue>> members;  // kObject, in order

  // The member named `key`, or nullptr.
  const JsonValue* find(std::string_view key) const;
};

// Fully validates and parses one JSON text.
Expected<JsonValue> parse_json(std::string_view text);

// Checks a whole line, as filters do not: every byte of it is one valid
// JSON text (encoding, structure, depth, literals, control characters in
// strings), with the parser's reason when it is not. For a stage whose job
// is to keep malformed records out of a pipeline (kdlq guard).
class JsonValidator {
 public:
  JsonValidator();
  ~JsonValidator();
  JsonValidator(const JsonValidator&) = delete;
  JsonValidator& operator=(const JsonValidator&) = delete;

  // `line` must be followed by kJsonPadding readable bytes. A data_error
  // such as "not valid JSON: nesting deeper than 1024" when it is not
  // valid. Numbers of any size are valid (see JsonField::number).
  Status check(std::string_view line);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// --- writing ---------------------------------------------------------------

bool is_valid_utf8(std::string_view bytes);

// Appends `text` (valid UTF-8) as a JSON string, quotes included.
void append_json_string(std::string& out, std::string_view text);

// Appends `.KEY`, one object key of a field path, so that FieldPath::parse
// reads it back (kpipe(7), FIELD PATHS): quoted, `."content.type"`, when the
// key is empty or holds what the dot form cannot.
void append_path_key(std::string& out, std::string_view key);
void append_int(std::string& out, int64_t v);
void append_uint(std::string& out, uint64_t v);
// The integer, or null when there is none.
void append_optional_int(std::string& out, std::optional<int64_t> v);
// Shortest text that reads back as the same double; integral values without
// a fraction ("3", not "3.0").
void append_double(std::string& out, double v);

// The digits of the integer a valid JSON number's text `raw` writes when
// it is one from 0 (1e3 and 5.0 are; 1.5 and -1 are not), beyond 64 bits
// too, written into `buffer` without leading zeros; nullopt otherwise, and
// for one of over `max_digits` digits.
std::optional<std::string_view> json_integer_digits(std::string_view raw, std::string& buffer,
                                                    size_t max_digits = 40);

void append_base64(std::string& out, std::string_view bytes);
Expected<std::string> decode_base64(std::string_view text);

// Appends `json` with insignificant whitespace removed. `json` must be valid.
void append_minified(std::string& out, std::string_view json);

// Embeds arbitrary bytes into JSON as the envelope's value (kpipe(7), THE ENVELOPE):
// a valid JSON text minified, else a JSON string when valid UTF-8, else
// nothing is appended and kBinary is returned so that the caller can write
// a base64 field instead. Validation is complete (simdjson's DOM parser):
// what is embedded as JSON is JSON.
class PayloadEncoder {
 public:
  enum class Kind { kJson, kString, kBinary };

  PayloadEncoder();
  ~PayloadEncoder();
  PayloadEncoder(const PayloadEncoder&) = delete;
  PayloadEncoder& operator=(const PayloadEncoder&) = delete;

  Kind append(std::string& out, std::string_view bytes);
  // Whether `bytes` is one complete, valid JSON text.
  bool is_json(std::string_view bytes);
  // The same, with the reason as JsonValidator gives it when it is not
  // ("not valid JSON: NaN is not JSON"). `bytes` needs no padding.
  Status check(std::string_view bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kpipe
