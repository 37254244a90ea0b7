// The NDJSON record reader (kpipe/json.h): JsonReader reads up to four
// field paths from a line in an exactly padded heap buffer. Properties:
// a line that the whole-line validator accepts is read without error, and
// every field read equals what an independent full parse (parse_json, the
// owning tree) finds at that path; every string read writes back
// (append_json_string) to JSON that reads as the same string; a field whose
// raw text is a JSON text by itself has the type the reader gave it;
// read_members gives an object's members in order, as the tree has them;
// a line read without error has its brackets balanced outside strings,
// however malformed a value no path reaches (kpipe(7), LINES: its top
// level is checked), and an object or array read is valid JSON alone.
//
// Input: up to four paths, each ended by '\n', after a first byte that
// says how many; the rest is the line.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "kpipe/json.h"

namespace {

using kpipe::JsonType;
using kpipe::JsonValue;

// The value at `path` in the tree, or nullptr; `ambiguous` when an object
// on the way repeats the key (which of the two a reader takes is its own).
const JsonValue* walk(const JsonValue& root, const kpipe::FieldPath& path, bool& ambiguous) {
  const JsonValue* v = &root;
  for (const auto& step : path.steps()) {
    if (v->type == JsonType::kObject && step.has_key) {
      const JsonValue* found = nullptr;
      for (const auto& [k, m] : v->members) {
        if (k != step.key) continue;
        if (found != nullptr) ambiguous = true;
        if (found == nullptr) found = &m;
      }
      if (found == nullptr) return nullptr;
      v = found;
    } else if (v->type == JsonType::kArray && step.has_index) {
      if (step.index >= v->items.size()) return nullptr;
      v = &v->items[step.index];
    } else {
      return nullptr;
    }
  }
  return v;
}

void check_same(const kpipe::JsonField& f, const JsonValue& v) {
  FUZZ_CHECK(f.type == v.type);
  switch (f.type) {
    case JsonType::kBool:
      FUZZ_CHECK(f.boolean == v.boolean);
      break;
    case JsonType::kString:
      FUZZ_CHECK(f.str == v.str);
      break;
    case JsonType::kNumber:
      FUZZ_CHECK(f.is_integer == v.is_integer);
      if (f.is_integer) FUZZ_CHECK(f.integer == v.integer);
      FUZZ_CHECK(f.number == v.number || (std::isnan(f.number) && std::isnan(v.number)));
      break;
    default:
      break;
  }
}

// Whether the brackets outside strings close as they open, counted
// byte by byte with no parser. A backslash escapes a quote or a backslash
// after it outside strings too (not JSON, but how the reader's tokenizer
// finds strings in a malformed value it skips); it escapes no bracket.
bool brackets_balance(std::string_view line) {
  long depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\\' && i + 1 < line.size() && (line[i + 1] == '"' || line[i + 1] == '\\')) {
      ++i;
      continue;
    }
    if (in_string) {
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') {
      if (--depth < 0) return false;
    }
  }
  return depth == 0 && !in_string;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t wanted = data[0] % 5;
  kpipe::FieldSet fields;
  for (size_t i = 0; i < wanted; ++i) {
    const size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) return 0;
    auto path = kpipe::FieldPath::parse(rest.substr(0, nl));
    rest.remove_prefix(nl + 1);
    if (!path) return 0;
    fields.add(*path);
  }
  kpipe::fuzz::PaddedInput input(rest);
  const std::string_view line = input.view();

  kpipe::JsonReader reader;
  std::vector<kpipe::JsonField> out;
  const kpipe::Status read = reader.read(line, fields, out);

  kpipe::JsonValidator validator;
  const bool valid = validator.check(line).ok();
  auto tree = kpipe::parse_json(line);
  // The two full validations agree.
  FUZZ_CHECK(valid == tree.ok());
  if (valid) FUZZ_CHECK(read.ok());
  if (read.ok()) FUZZ_CHECK(brackets_balance(line));

  if (read.ok()) {
    FUZZ_CHECK(out.size() == fields.size());
    for (size_t slot = 0; slot < fields.size(); ++slot) {
      const kpipe::JsonField& f = out[slot];
      if (f.type == JsonType::kMissing) {
        if (tree.ok()) {
          bool ambiguous = false;
          FUZZ_CHECK(walk(*tree, fields.path(slot), ambiguous) == nullptr || ambiguous);
        }
        continue;
      }
      FUZZ_CHECK(!f.raw.empty());
      // The raw text lies within the line or is the reader's own copy.
      if (f.type == JsonType::kString) {
        FUZZ_CHECK(kpipe::is_valid_utf8(f.str));
        std::string written;
        kpipe::append_json_string(written, f.str);
        auto back = kpipe::parse_json(written);
        FUZZ_CHECK(back.ok() && back->type == JsonType::kString && back->str == f.str);
      }
      auto alone = kpipe::parse_json(f.raw);
      // An object or array read is taken whole, so it was checked whole.
      if (f.type == JsonType::kObject || f.type == JsonType::kArray) FUZZ_CHECK(alone.ok());
      if (alone.ok()) check_same(f, *alone);
      if (tree.ok()) {
        bool ambiguous = false;
        const JsonValue* v = walk(*tree, fields.path(slot), ambiguous);
        if (!ambiguous) {
          FUZZ_CHECK(v != nullptr);
          check_same(f, *v);
        }
      }
    }
  }

  std::vector<kpipe::JsonMember> members;
  kpipe::JsonReader member_reader;
  if (member_reader.read_members(line, members).ok() && tree.ok()) {
    FUZZ_CHECK(tree->type == JsonType::kObject);
    FUZZ_CHECK(members.size() == tree->members.size());
    for (size_t i = 0; i < members.size(); ++i) {
      FUZZ_CHECK(members[i].key == tree->members[i].first);
      check_same(members[i].value, tree->members[i].second);
    }
  }

  // A valid line minified is valid and means the same.
  if (tree.ok()) {
    std::string minified;
    kpipe::append_minified(minified, line);
    auto again = kpipe::parse_json(minified);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->type == tree->type);
  }
  return 0;
}
