#include "kpipe/json.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <type_traits>

#include <simdjson.h>

#include "kpipe/quote.h"

namespace kpipe {

namespace od = simdjson::ondemand;

const char* json_type_phrase(JsonType t) {
  switch (t) {
    case JsonType::kMissing:
      return "missing";
    case JsonType::kNull:
      return "null";
    case JsonType::kBool:
      return "a bool";
    case JsonType::kNumber:
      return "a number";
    case JsonType::kString:
      return "a string";
    case JsonType::kObject:
      return "an object";
    case JsonType::kArray:
      return "an array";
  }
  return "?";
}

// --- paths -------------------------------------------------------------------

namespace {

Error bad_path(std::string_view text, std::string_view why) {
  return usage_error("invalid field path '{}': {}", text, why);
}

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return !(s.size() > 1 && s[0] == '0');
}

Status parse_pointer(std::string_view text, std::vector<PathStep>& steps) {
  // RFC 6901: "/a~1b/0" is the key "a/b" then the key or index "0".
  size_t pos = 1;
  for (;;) {
    size_t end = text.find('/', pos);
    std::string_view token = text.substr(pos, end == std::string_view::npos ? end : end - pos);
    PathStep step;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] != '~') {
        step.key.push_back(token[i]);
        continue;
      }
      if (i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
        step.key.push_back(token[i + 1] == '0' ? '~' : '/');
        ++i;
        continue;
      }
      return bad_path(text, "'~' must be followed by 0 or 1");
    }
    if (all_digits(token)) {
      step.has_index = true;
      std::from_chars(token.data(), token.data() + token.size(), step.index);
    }
    steps.push_back(std::move(step));
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return {};
}

}  // namespace

Expected<FieldPath> FieldPath::parse(std::string_view text) {
  FieldPath path;
  path.text_ = std::string(text);
  if (text.empty()) return bad_path(text, "it is empty");
  if (text[0] == '/') {
    KPIPE_TRY(parse_pointer(text, path.steps_));
    return path;
  }
  size_t i = 0;
  if (text[0] == '.') i = 1;
  if (i == text.size()) return path;  // "." is the whole line
  bool expect_key = true;
  while (i < text.size()) {
    char c = text[i];
    if (c == '[') {
      size_t close = text.find(']', i);
      if (close == std::string_view::npos) return bad_path(text, "'[' without ']'");
      std::string_view digits = text.substr(i + 1, close - i - 1);
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
        return bad_path(text, "an index must be a non-negative integer");
      PathStep step;
      step.has_key = false;
      step.has_index = true;
      if (std::from_chars(digits.data(), digits.data() + digits.size(), step.index).ec !=
          std::errc())
        return bad_path(text, "an index is too large");
      path.steps_.push_back(std::move(step));
      i = close + 1;
      expect_key = false;
      continue;
    }
    if (c == '.') {
      if (expect_key) return bad_path(text, "empty segment");
      ++i;
      expect_key = true;
      if (i == text.size()) return bad_path(text, "it ends with '.'");
      continue;
    }
    if (!expect_key) return bad_path(text, "expected '.' or '[' after a segment");
    PathStep step;
    if (c == '"') {
      ++i;
      bool closed = false;
      while (i < text.size()) {
        char d = text[i++];
        if (d == '"') {
          closed = true;
          break;
        }
        if (d == '\\' && i < text.size()) d = text[i++];
        step.key.push_back(d);
      }
      if (!closed) return bad_path(text, "unterminated quoted segment");
    } else {
      while (i < text.size() && text[i] != '.' && text[i] != '[') {
        if (text[i] == '"' || text[i] == ']')
          return bad_path(text, "quote or ']' inside a segment");
        step.key.push_back(text[i++]);
      }
    }
    path.steps_.push_back(std::move(step));
    expect_key = false;
  }
  return path;
}

std::string FieldPath::last_key() const {
  if (steps_.empty() || !steps_.back().has_key) return {};
  return steps_.back().key;
}

struct FieldSet::Node {
  PathStep step;
  int slot = -1;
  std::vector<size_t> children;
};

FieldSet::FieldSet() : nodes_(std::make_unique<std::vector<Node>>(1)) {}
FieldSet::~FieldSet() = default;
FieldSet::FieldSet(FieldSet&&) noexcept = default;
FieldSet& FieldSet::operator=(FieldSet&&) noexcept = default;

const std::vector<FieldSet::Node>& FieldSet::nodes() const {
  return *nodes_;
}

size_t FieldSet::add(const FieldPath& path) {
  auto& nodes = *nodes_;
  size_t at = 0;
  for (const PathStep& step : path.steps()) {
    size_t found = 0;
    for (size_t child : nodes[at].children) {
      const PathStep& s = nodes[child].step;
      if (s.has_key == step.has_key && s.has_index == step.has_index && s.key == step.key &&
          s.index == step.index) {
        found = child;
        break;
      }
    }
    if (found == 0) {
      nodes.push_back(Node{step, -1, {}});
      found = nodes.size() - 1;
      nodes[at].children.push_back(found);
    }
    at = found;
  }
  size_t slot = paths_.size();
  paths_.push_back(path);
  if (nodes[at].slot < 0) {
    nodes[at].slot = static_cast<int>(slot);
  } else {
    aliases_.push_back({static_cast<size_t>(nodes[at].slot), slot});
  }
  return slot;
}

// --- reading -----------------------------------------------------------------

namespace {

std::string_view trim_right(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

const char* reason(simdjson::error_code e) {
  using simdjson::error_code;
  switch (e) {
    case error_code::UTF8_ERROR:
      return "not valid JSON: invalid UTF-8";
    case error_code::UNCLOSED_STRING:
      return "not valid JSON: unclosed string";
    case error_code::UNESCAPED_CHARS:
      return "not valid JSON: unescaped control character in a string";
    case error_code::DEPTH_ERROR:
      return "not valid JSON: nesting deeper than 1024";
    case error_code::NUMBER_ERROR:
      return "not valid JSON: malformed number";
    case error_code::NUMBER_OUT_OF_RANGE:
      return "not valid JSON: number out of range";
    case error_code::STRING_ERROR:
      return "not valid JSON: malformed string escape";
    case error_code::T_ATOM_ERROR:
    case error_code::F_ATOM_ERROR:
    case error_code::N_ATOM_ERROR:
      return "not valid JSON: invalid literal";
    case error_code::EMPTY:
      return "not valid JSON: empty";
    case error_code::TRAILING_CONTENT:
      return "not valid JSON: content after the value";
    case error_code::INCOMPLETE_ARRAY_OR_OBJECT:
      return "not valid JSON: truncated object or array";
    default:
      return "not valid JSON: malformed structure";
  }
}

// simdjson refuses a value inside this many containers.
constexpr size_t kMaxDepth = simdjson::DEFAULT_MAX_DEPTH;
static_assert(kMaxDepth == 1024, "reason() names the depth");

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// RFC 8259's number grammar. simdjson refuses integers beyond 64 bits and
// numbers beyond a double (1e400) as it refuses malformed ones; this tells
// them apart.
bool is_json_number(std::string_view s) {
  size_t i = 0, n = s.size();
  if (i < n && s[i] == '-') ++i;
  if (i == n) return false;
  if (s[i] == '0') {
    ++i;
  } else if (is_digit(s[i])) {
    while (i < n && is_digit(s[i])) ++i;
  } else {
    return false;
  }
  if (i < n && s[i] == '.') {
    size_t start = ++i;
    while (i < n && is_digit(s[i])) ++i;
    if (i == start) return false;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    size_t start = i;
    while (i < n && is_digit(s[i])) ++i;
    if (i == start) return false;
  }
  return i == n;
}

// Where a bare word (a literal, a number, or garbage) ends, as simdjson's
// tokens do: at whitespace, structure, a quote, or a NUL.
bool ends_word(char c) {
  switch (c) {
    case ' ':
    case '\t':
    case '\n':
    case '\r':
    case '{':
    case '}':
    case '[':
    case ']':
    case ',':
    case ':':
    case '"':
    case '\0':
      return true;
    default:
      return false;
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code unit of the \uXXXX escape at s[i] (the backslash), or -1.
int unicode_escape(std::string_view s, size_t i) {
  if (i + 6 > s.size() || s[i] != '\\' || s[i + 1] != 'u') return -1;
  int v = 0;
  for (size_t k = i + 2; k < i + 6; ++k) {
    int h = hex_value(s[k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

// The string whose opening quote is s[i]: its fault, or empty with `i`
// past the closing quote.
std::string string_fault(std::string_view s, size_t& i) {
  for (++i; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == '"') {
      ++i;
      return {};
    }
    if (c < 0x20) return "unescaped control character in a string";
    if (c != '\\') continue;
    if (i + 1 == s.size()) break;
    char e = s[i + 1];
    if (std::string_view("\"\\/bfnrt").find(e) != std::string_view::npos) {
      ++i;
      continue;
    }
    int unit = unicode_escape(s, i);
    if (unit < 0) return "malformed string escape";
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      int low = unicode_escape(s, i + 6);
      if (low >= 0xDC00 && low <= 0xDFFF) {
        i += 11;
        continue;
      }
    }
    if (unit >= 0xD800 && unit <= 0xDFFF) return fmt::format("a lone surrogate {}", s.substr(i, 6));
    i += 5;
  }
  return "unclosed string";
}

// The bare word at s[i] in a value's place: its fault, or empty with `i`
// past it.
std::string word_fault(std::string_view s, size_t& i) {
  size_t start = i;
  while (i < s.size() && !ends_word(s[i])) ++i;
  std::string_view w = s.substr(start, i - start);
  if (w.empty()) return s[start] == '\0' ? "a NUL byte outside a string" : "malformed structure";
  if (w == "true" || w == "false" || w == "null") return {};
  if (w == "NaN" || w == "-NaN" || w == "Infinity" || w == "-Infinity" || w == "+Infinity")
    return fmt::format("{} is not JSON", w);
  if (w[0] == '-' || is_digit(w[0])) return is_json_number(w) ? std::string() : "malformed number";
  return fmt::format("{} is not a JSON value", quoted(w, kJsonWordQuote));
}

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  return i;
}

// Reads a whole JSON text slowly, to name its first fault in the user's
// terms (simdjson's error codes are coarser: a BOM, NaN and `{} x` are all
// one "malformed structure"), or empty when it is valid. Off the hot path:
// it runs only when simdjson has refused a line. It does not check the
// encoding, which simdjson has checked first.
std::string find_fault(std::string_view s) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (s.substr(0, 3) == kBom) return "the line begins with a UTF-8 byte order mark (BOM)";
  enum class Want { kValue, kKeyOrEnd, kKey, kColon, kNext };
  std::string open;  // the containers around the position, '{' or '['
  Want want = Want::kValue;
  size_t i = 0;
  for (;;) {
    i = skip_space(s, i);
    if (want == Want::kNext && open.empty()) break;
    if (i == s.size()) return open.empty() ? "empty" : "truncated object or array";
    char c = s[i];
    std::string fault;
    switch (want) {
      case Want::kValue:
        if (open.size() >= kMaxDepth) return fmt::format("nesting deeper than {}", kMaxDepth);
        if (c == '{' || c == '[') {
          open.push_back(c);
          ++i;
          want = c == '{' ? Want::kKeyOrEnd : Want::kValue;
          if (c == '[') {
            i = skip_space(s, i);
            if (i < s.size() && s[i] == ']') {
              open.pop_back();
              ++i;
              want = Want::kNext;
            }
          }
          continue;
        }
        fault = c == '"' ? string_fault(s, i) : word_fault(s, i);
        if (!fault.empty()) return fault;
        want = Want::kNext;
        continue;
      case Want::kKeyOrEnd:
        if (c == '}') {
          open.pop_back();
          ++i;
          want = Want::kNext;
          continue;
        }
        [[fallthrough]];
      case Want::kKey:
        if (c != '"') return c == '\0' ? "a NUL byte outside a string" : "malformed structure";
        fault = string_fault(s, i);
        if (!fault.empty()) return fault;
        want = Want::kColon;
        continue;
      case Want::kColon:
        if (c != ':') return c == '\0' ? "a NUL byte outside a string" : "malformed structure";
        ++i;
        want = Want::kValue;
        continue;
      case Want::kNext:
        if (c == ',') {
          ++i;
          want = open.back() == '{' ? Want::kKey : Want::kValue;
          continue;
        }
        if ((c == '}' && open.back() == '{') || (c == ']' && open.back() == '[')) {
          open.pop_back();
          ++i;
          continue;
        }
        return c == '\0' ? "a NUL byte outside a string" : "malformed structure";
    }
  }
  if (i == s.size()) return {};
  return s[i] == '\0' ? "a NUL byte after the value" : "content after the value";
}

// simdjson's refusal of `line` as a message. Its vaguer codes get a
// second reading of the line, which names the fault.
std::string explain(simdjson::error_code e, std::string_view line) {
  using simdjson::error_code;
  switch (e) {
    case error_code::UTF8_ERROR:
    case error_code::UNCLOSED_STRING:
    case error_code::UNESCAPED_CHARS:
    case error_code::EMPTY:
    case error_code::CAPACITY:
    case error_code::MEMALLOC:
      return reason(e);
    default:
      break;
  }
  std::string fault = find_fault(line);
  if (fault.empty()) return reason(e);
  return "not valid JSON: " + fault;
}

// Whether a text that simdjson's DOM parser refused with NUMBER_ERROR is
// valid JSON all the same: it refuses integers beyond 64 bits and numbers
// beyond a double, which are JSON (jq reads them).
bool valid_but_for_numbers(simdjson::error_code e, std::string_view text) {
  return e == simdjson::NUMBER_ERROR && is_valid_utf8(text) && find_fault(text).empty();
}

// Whether `text`, followed by simdjson's padding, is one whole JSON text:
// SUCCESS or the DOM parser's error.
simdjson::error_code check_text(simdjson::dom::parser& parser, std::string_view text) {
  simdjson::dom::element e;
  simdjson::error_code err = parser.parse(text.data(), text.size(), false).get(e);
  return err && valid_but_for_numbers(err, text) ? simdjson::SUCCESS : err;
}

JsonType to_type(od::json_type t) {
  switch (t) {
    case od::json_type::array:
      return JsonType::kArray;
    case od::json_type::object:
      return JsonType::kObject;
    case od::json_type::number:
      return JsonType::kNumber;
    case od::json_type::string:
      return JsonType::kString;
    case od::json_type::boolean:
      return JsonType::kBool;
    case od::json_type::null:
      return JsonType::kNull;
  }
  return JsonType::kMissing;
}

}  // namespace

simdjson::error_code raw_token(od::value& v, std::string_view& out) {
  out = v.raw_json_token();
  return simdjson::SUCCESS;
}
simdjson::error_code raw_token(od::document& d, std::string_view& out) {
  return d.raw_json_token().get(out);
}

namespace {

// simdjson 3.0's get_number() (Debian 12's) reads a decimal of more than
// 19 significant digits, such as 123456.7891023456789012345678901234567890,
// as 0 (found by tests/fuzz, json_reader). Such a number's text is read
// here instead, correctly rounded as get_double() reads it.
double long_decimal(std::string_view raw, double fast) {
  if (raw.size() <= 19) return fast;  // at most 19 digits: simdjson is right
  double d = 0;
  auto [end, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), d);
  if (ec == std::errc() && end == raw.data() + raw.size()) return d;
  return fast;
}

// Whether the document has been read to its end.
bool at_end(od::document& doc) {
  const char* rest = nullptr;
  return doc.current_location().get(rest) != simdjson::SUCCESS;
}

// Whether only whitespace follows the document's top-level scalar, which
// simdjson left unread.
bool is_blank_after(std::string_view line, od::document& doc) {
  std::string_view token;
  if (doc.raw_json_token().get(token) != simdjson::SUCCESS) return false;
  size_t end = static_cast<size_t>(token.data() - line.data()) + trim_right(token).size();
  return line.find_first_not_of(" \t\n\r", end) == std::string_view::npos;
}

}  // namespace

struct JsonReader::Impl {
  od::parser parser;
  // For the root when it is both a leaf and a prefix (rare): the leaf's
  // text is read again with a parser of its own, one per level, since
  // re-using a parser ends the document that a level above is still
  // walking.
  std::vector<std::unique_ptr<od::parser>> nested;
  // The document being walked, whose position tells where a value walked
  // through ends (capture).
  od::document* doc = nullptr;
  size_t nested_depth = 0;
  const std::vector<FieldSet::Node>* nodes = nullptr;
  JsonField* out = nullptr;
  simdjson::error_code error = simdjson::SUCCESS;
  // The top-level value was a number that simdjson could not consume.
  bool root_unread = false;
  // Checks an object or array taken whole (check_whole).
  simdjson::dom::parser whole_validator;

  // One parse of the number (get_number_type() then get_int64() would
  // read its digits twice).
  template <typename V>
  bool read_number(V& v, JsonField& f) {
    od::number n;
    if ((error = v.get_number().get(n))) {
      // get_number() refuses integers beyond 64 bits and numbers beyond a
      // double (1e400) as it refuses malformed ones, but the first two are
      // JSON: a number whose text (raw) passes on untouched. An integer
      // reads as the nearest double, as in jq; beyond a double, as an
      // infinity, which a program computing with it refuses.
      if (error != simdjson::NUMBER_ERROR || !is_json_number(f.raw)) return false;
      error = simdjson::SUCCESS;
      if (v.get_double().get(f.number) != simdjson::SUCCESS) {
        f.number = f.raw[0] == '-' ? -HUGE_VAL : HUGE_VAL;
        // A document's value is then left unread: read() checks its end.
        if constexpr (std::is_same_v<V, od::document>) root_unread = true;
      }
      return true;
    }
    switch (n.get_number_type()) {
      case od::number_type::signed_integer:
        f.integer = n.get_int64();
        f.is_integer = true;
        f.number = static_cast<double>(f.integer);
        return true;
      case od::number_type::unsigned_integer:
        f.number = static_cast<double>(n.get_uint64());
        return true;
      default:
        f.number = long_decimal(f.raw, n.get_double());
        return true;
    }
  }

  // Reads a whole value into `f`. V is od::value or od::document.
  template <typename V>
  bool read_leaf(V& v, JsonField& f) {
    od::json_type t;
    if ((error = v.type().get(t))) return false;
    f.type = to_type(t);
    switch (t) {
      // raw_json() runs on to the next token: trimmed like a scalar's, so
      // that a value's text does not depend on the spacing after it.
      case od::json_type::object: {
        od::object o;
        if ((error = v.get_object().get(o)) || (error = o.raw_json().get(f.raw))) return false;
        f.raw = trim_right(f.raw);
        return check_whole(f.raw);
      }
      case od::json_type::array: {
        od::array a;
        if ((error = v.get_array().get(a)) || (error = a.raw_json().get(f.raw))) return false;
        f.raw = trim_right(f.raw);
        return check_whole(f.raw);
      }
      default:
        break;
    }
    std::string_view token;
    if ((error = raw_token(v, token))) return false;
    f.raw = trim_right(token);
    switch (t) {
      case od::json_type::string:
        // Without a backslash the text between the quotes is the string:
        // no need to unescape a copy (stage 1 has checked its encoding and
        // control characters), only to move past it (pass_unread says
        // why). Not for a document, whose value must be consumed for the
        // trailing-content check.
        if constexpr (std::is_same_v<V, od::value>) {
          if (f.raw.size() >= 2 && std::memchr(f.raw.data(), '\\', f.raw.size()) == nullptr) {
            f.str = f.raw.substr(1, f.raw.size() - 2);
            return consume_string(v);
          }
        }
        return !(error = v.get_string().get(f.str));
      case od::json_type::number:
        return read_number(v, f);
      case od::json_type::boolean:
        // simdjson 3.0 refuses a line of true or false followed by a few
        // blanks (its root literal checks look past the literal; found by
        // tests/fuzz, json_reader): for the root the token's text decides.
        if constexpr (std::is_same_v<V, od::document>) {
          if (f.raw != "true" && f.raw != "false") {
            error = simdjson::INCORRECT_TYPE;
            return false;
          }
          f.boolean = f.raw == "true";
          root_unread = true;  // read() checks that only blanks follow
          return true;
        }
        return !(error = v.get_bool().get(f.boolean));
      case od::json_type::null: {
        // Likewise, document::is_null() looks at the sixth byte, not the
        // fifth, so a line of null and one blank was "invalid literal"
        // (found by tests/fuzz, guard).
        if constexpr (std::is_same_v<V, od::document>) {
          if (f.raw != "null") {
            error = simdjson::N_ATOM_ERROR;
            return false;
          }
          root_unread = true;  // read() checks that only blanks follow
          return true;
        }
        bool is_null;
        if ((error = v.is_null().get(is_null))) return false;
        if (!is_null) error = simdjson::N_ATOM_ERROR;
        return is_null;
      }
      default:
        return true;
    }
  }

  // An object or array that a program takes whole (kproduce's .value,
  // kupsert's columns, kjoin's --as) is a value it uses, so it is checked
  // whole (kpipe(7), LINES): raw_json() only counts its brackets, and
  // {"value":{"x":nul}} gave kproduce a value that is not JSON (found by
  // tests/fuzz, json_reader). `text` lies in a padded line, so the DOM
  // parser reads it where it is.
  bool check_whole(std::string_view text) { return !(error = check_text(whole_validator, text)); }

  // simdjson 3.0 skips a value left unread by counting brackets, and looks
  // less closely at where it starts: a string followed by ':' it takes for
  // a key and skips on past the value after it, and a ':', ',' or closing
  // bracket where a value should start it skips as if it were one. An
  // extra closing bracket then ended the line's top level where it should
  // not: {"a":1,"b":"":2}} and [1,:"y"}] passed a filter (found by
  // tests/fuzz, json_reader). So every value left unread must start as a
  // value does, and a string is consumed, which is cheaper than letting
  // simdjson skip it (a look at its first byte, not a parse).
  bool pass_unread(od::value& v) {
    od::json_type t;
    if ((error = v.type().get(t))) return false;
    return t != od::json_type::string || consume_string(v);
  }

  // Moves past a string value without unescaping it.
  bool consume_string(od::value& v) {
    od::raw_json_string s;
    return !(error = v.get_raw_json_string().get(s));
  }

  bool capture(od::value v, size_t node_index) {
    const FieldSet::Node& node = (*nodes)[node_index];
    if (node.slot < 0) return descend(v, node);
    JsonField& f = out[static_cast<size_t>(node.slot)];
    if (f.type != JsonType::kMissing) return pass_unread(v);  // a repeated key: the first wins
    if (node.children.empty()) return read_leaf(v, f);
    // Both a leaf and a prefix (kjoin's --as and its parent): an object or
    // array is walked once for the deeper paths, and its text is from its
    // first byte to where the walk left the document.
    od::json_type t;
    if ((error = v.type().get(t))) return false;
    if (t != od::json_type::object && t != od::json_type::array) return read_leaf(v, f);
    const char* start = v.raw_json_token().data();
    if (!descend(v, node)) return false;
    const char* end = nullptr;
    if ((error = doc->current_location().get(end))) return false;
    f.type = to_type(t);
    f.raw = trim_right(std::string_view(start, static_cast<size_t>(end - start)));
    return check_whole(f.raw);
  }

  bool descend_text(std::string_view text, const FieldSet::Node& node) {
    if (nested_depth == nested.size()) nested.push_back(std::make_unique<od::parser>());
    od::parser& p = *nested[nested_depth];
    ++nested_depth;
    od::document inner_doc;
    od::document* outer = doc;
    doc = &inner_doc;
    od::value inner;
    bool ok = !(error = p.iterate(text.data(), text.size(), text.size() + 64).get(inner_doc)) &&
              !(error = inner_doc.get_value().get(inner)) && descend(inner, node);
    doc = outer;
    --nested_depth;
    return ok;
  }

  bool descend(od::value v, const FieldSet::Node& node) {
    od::json_type t;
    if ((error = v.type().get(t))) return false;
    if (t == od::json_type::object) {
      od::object o;
      if ((error = v.get_object().get(o))) return false;
      return walk_object(o, node);
    }
    if (t == od::json_type::array) {
      od::array a;
      if ((error = v.get_array().get(a))) return false;
      return walk_array(a, node);
    }
    return pass_unread(v);  // a path through a scalar finds nothing
  }

  bool walk_object(od::object& o, const FieldSet::Node& node) {
    for (auto field_result : o) {
      od::field field;
      if ((error = std::move(field_result).get(field))) return false;
      // Nearly every key holds no escape: its bytes up to the closing quote
      // are the key, and unescaping (a call through simdjson's dispatch)
      // can be skipped. Stage 1 has checked that the quote is there.
      const char* raw = field.key().raw();
      const char* end = raw;
      while (*end != '"' && *end != '\\') ++end;
      std::string_view key(raw, static_cast<size_t>(end - raw));
      if (*end != '"' && (error = field.unescaped_key().get(key))) return false;
      bool read = false;
      for (size_t child : node.children) {
        const PathStep& s = (*nodes)[child].step;
        if (s.has_key && s.key == key) {
          if (!capture(field.value(), child)) return false;
          read = true;
          break;
        }
      }
      if (!read && !pass_unread(field.value())) return false;
    }
    return true;
  }

  // Starts a line: its structure (stage 1) and its top-level type.
  bool start(std::string_view line, od::document& doc, od::json_type& t) {
    return !(error = parser.iterate(line.data(), line.size(), line.size() + 64).get(doc)) &&
           !(error = doc.type().get(t));
  }

  bool walk_array(od::array& a, const FieldSet::Node& node) {
    uint64_t i = 0;
    for (auto element_result : a) {
      od::value element;
      if ((error = std::move(element_result).get(element))) return false;
      bool read = false;
      for (size_t child : node.children) {
        const PathStep& s = (*nodes)[child].step;
        if (s.has_index && s.index == i) {
          if (!capture(element, child)) return false;
          read = true;
          break;
        }
      }
      if (!read && !pass_unread(element)) return false;
      ++i;
    }
    return true;
  }
};

JsonReader::JsonReader() : impl_(std::make_unique<Impl>()) {}
JsonReader::~JsonReader() = default;

Status JsonReader::read(std::string_view line, const FieldSet& fields,
                        std::vector<JsonField>& out) {
  out.resize(fields.size());
  return read(line, fields, out.data());
}

Status JsonReader::read(std::string_view line, const FieldSet& fields, JsonField* out) {
  Impl& m = *impl_;
  std::fill_n(out, fields.size(), JsonField{});
  root_type_ = JsonType::kMissing;
  m.nodes = &fields.nodes();
  m.out = out;
  m.error = simdjson::SUCCESS;
  m.nested_depth = 0;
  m.root_unread = false;
  const FieldSet::Node& root = fields.nodes()[0];

  od::document doc;
  od::json_type t;
  if (!m.start(line, doc, t)) return data_error(explain(m.error, line));
  root_type_ = to_type(t);
  m.doc = &doc;
  bool ok = true;
  if (root.slot >= 0) {
    JsonField& f = out[static_cast<size_t>(root.slot)];
    ok = m.read_leaf(doc, f);
    if (ok && !root.children.empty() && (t == od::json_type::object || t == od::json_type::array))
      ok = m.descend_text(f.raw, root);
  } else if (t == od::json_type::object) {
    od::object o;
    ok = !(m.error = doc.get_object().get(o)) && m.walk_object(o, root);
  } else if (t == od::json_type::array) {
    od::array a;
    ok = !(m.error = doc.get_array().get(a)) && m.walk_array(a, root);
  } else {
    JsonField scratch;
    ok = m.read_leaf(doc, scratch);
  }
  if (!ok) return data_error(explain(m.error, line));
  // Anything left after the value (`{"a":1} x`) makes the line invalid.
  if (m.root_unread ? !is_blank_after(line, doc) : !at_end(doc))
    return data_error(explain(simdjson::TRAILING_CONTENT, line));
  for (auto [from, to] : fields.aliases()) out[to] = out[from];
  return {};
}

Status JsonReader::read_members(std::string_view line, std::vector<JsonMember>& out) {
  Impl& m = *impl_;
  out.clear();
  root_type_ = JsonType::kMissing;
  m.error = simdjson::SUCCESS;
  m.root_unread = false;
  od::document doc;
  od::json_type t;
  if (!m.start(line, doc, t)) return data_error(explain(m.error, line));
  root_type_ = to_type(t);
  if (t != od::json_type::object) {
    // What is not an object may not be JSON either (`nul` looks like null
    // at its first byte): that is the fault to name.
    std::string fault = find_fault(line);
    if (!fault.empty()) return data_error("not valid JSON: {}", fault);
    return data_error("expected a JSON object, not {}", json_type_phrase(root_type_));
  }
  // Every member is read whole, objects and arrays checked whole
  // (check_whole), so the line is: tests/fuzz (upsert_row) found
  // {"a":[1,{"b":nul}]} and {"id":"Z","name":"":[1,2]}} passing when
  // neither was.
  od::object o;
  if ((m.error = doc.get_object().get(o))) return data_error(explain(m.error, line));
  for (auto field_result : o) {
    od::field field;
    if ((m.error = std::move(field_result).get(field))) return data_error(explain(m.error, line));
    std::string_view key;
    if ((m.error = field.unescaped_key().get(key))) return data_error(explain(m.error, line));
    JsonMember& member = out.emplace_back();
    member.key = key;
    member.value = JsonField{};
    od::value v = field.value();
    if (!m.read_leaf(v, member.value)) return data_error(explain(m.error, line));
  }
  if (!at_end(doc)) return data_error(explain(simdjson::TRAILING_CONTENT, line));
  return {};
}

bool is_control_line(std::string_view line) {
  size_t i = 0;
  auto skip_ws = [&] {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  };
  skip_ws();
  if (i >= line.size() || line[i] != '{') return false;
  ++i;
  skip_ws();
  return line.substr(i, 8) == "\"$kpipe\"";
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [name, value] : members)
    if (name == key) return &value;
  return nullptr;
}

namespace {

JsonValue from_dom(simdjson::dom::element e) {
  JsonValue v;
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: {
      v.type = JsonType::kArray;
      simdjson::dom::array array(e);
      for (simdjson::dom::element item : array) v.items.push_back(from_dom(item));
      break;
    }
    case simdjson::dom::element_type::OBJECT: {
      v.type = JsonType::kObject;
      simdjson::dom::object object(e);
      for (simdjson::dom::key_value_pair field : object)
        v.members.emplace_back(std::string(field.key), from_dom(field.value));
      break;
    }
    case simdjson::dom::element_type::INT64:
      v.type = JsonType::kNumber;
      v.is_integer = true;
      v.integer = e.get_int64().value_unsafe();
      v.number = static_cast<double>(v.integer);
      v.str = simdjson::minify(e);
      break;
    case simdjson::dom::element_type::UINT64:
      v.type = JsonType::kNumber;
      v.number = static_cast<double>(e.get_uint64().value_unsafe());
      v.str = simdjson::minify(e);
      break;
    case simdjson::dom::element_type::DOUBLE:
      v.type = JsonType::kNumber;
      v.number = e.get_double().value_unsafe();
      v.str = simdjson::minify(e);
      break;
    case simdjson::dom::element_type::STRING:
      v.type = JsonType::kString;
      v.str = std::string(e.get_string().value_unsafe());
      break;
    case simdjson::dom::element_type::BOOL:
      v.type = JsonType::kBool;
      v.boolean = e.get_bool().value_unsafe();
      break;
    case simdjson::dom::element_type::NULL_VALUE:
      v.type = JsonType::kNull;
      break;
  }
  return v;
}

// The tree of a valid text that the DOM parser refused for a number it
// cannot hold: such a number keeps its text in `str`, as every number
// does, and reads as in JsonReader.
bool from_ondemand(od::value v, JsonValue& out) {
  od::json_type t;
  if (v.type().get(t)) return false;
  out.type = to_type(t);
  switch (t) {
    case od::json_type::array: {
      od::array a;
      if (v.get_array().get(a)) return false;
      for (auto item : a) {
        od::value e;
        if (std::move(item).get(e) || !from_ondemand(e, out.items.emplace_back())) return false;
      }
      return true;
    }
    case od::json_type::object: {
      od::object o;
      if (v.get_object().get(o)) return false;
      for (auto member : o) {
        od::field f;
        std::string_view key;
        if (std::move(member).get(f) || f.unescaped_key().get(key)) return false;
        out.members.emplace_back(std::string(key), JsonValue{});
        if (!from_ondemand(f.value(), out.members.back().second)) return false;
      }
      return true;
    }
    case od::json_type::number: {
      out.str = std::string(trim_right(v.raw_json_token()));
      od::number n;
      if (v.get_number().get(n) == simdjson::SUCCESS) {
        out.is_integer = n.get_number_type() == od::number_type::signed_integer;
        if (out.is_integer) out.integer = n.get_int64();
        out.number = out.is_integer || n.get_number_type() == od::number_type::unsigned_integer
                         ? n.as_double()
                         : long_decimal(out.str, n.as_double());
        return true;
      }
      if (v.get_double().get(out.number)) out.number = out.str[0] == '-' ? -HUGE_VAL : HUGE_VAL;
      return true;
    }
    case od::json_type::string: {
      std::string_view str;
      if (v.get_string().get(str)) return false;
      out.str = std::string(str);
      return true;
    }
    case od::json_type::boolean:
      return v.get_bool().get(out.boolean) == simdjson::SUCCESS;
    case od::json_type::null:
      return true;
  }
  return false;
}

}  // namespace

Expected<JsonValue> parse_json(std::string_view text) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  auto err = parser.parse(padded).get(root);
  if (!err) return from_dom(root);
  if (!valid_but_for_numbers(err, text)) return data_error(explain(err, text));
  // In an array, so that a top-level scalar is a value like any other.
  std::string array = "[";
  array.append(text);
  array.push_back(']');
  simdjson::padded_string wrapped(array);
  od::parser reader;
  od::document doc;
  od::array items;
  JsonValue v;
  if (reader.iterate(wrapped).get(doc) || doc.get_array().get(items))
    return data_error(reason(err));
  for (auto item : items) {
    od::value e;
    if (std::move(item).get(e) || !from_ondemand(e, v)) return data_error(reason(err));
  }
  return v;
}

struct JsonValidator::Impl {
  simdjson::dom::parser parser;
};

JsonValidator::JsonValidator() : impl_(std::make_unique<Impl>()) {}
JsonValidator::~JsonValidator() = default;

Status JsonValidator::check(std::string_view line) {
  simdjson::error_code err = check_text(impl_->parser, line);
  if (!err) return {};
  return data_error(explain(err, line));
}

// --- writing -----------------------------------------------------------------

bool is_valid_utf8(std::string_view bytes) {
  return simdjson::validate_utf8(bytes.data(), bytes.size());
}

namespace {

// 0: copy; 1: short escape; 2: \u00XX.
constexpr auto kEscape = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = 2;
  t['\b'] = t['\f'] = t['\n'] = t['\r'] = t['\t'] = 1;
  t['"'] = t['\\'] = 1;
  return t;
}();

char short_escape(char c) {
  switch (c) {
    case '\b':
      return 'b';
    case '\f':
      return 'f';
    case '\n':
      return 'n';
    case '\r':
      return 'r';
    case '\t':
      return 't';
    default:
      return c;
  }
}

}  // namespace

void append_path_key(std::string& out, std::string_view key) {
  out.push_back('.');
  if (!key.empty() && key.find_first_of(".[]\"\\/") == std::string_view::npos) {
    out.append(key);
    return;
  }
  out.push_back('"');
  for (char c : key) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
}

void append_json_string(std::string& out, std::string_view text) {
  out.push_back('"');
  const char* p = text.data();
  const char* end = p + text.size();
  const char* run = p;
  for (; p < end; ++p) {
    uint8_t kind = kEscape[static_cast<unsigned char>(*p)];
    if (kind == 0) continue;
    out.append(run, static_cast<size_t>(p - run));
    if (kind == 1) {
      out.push_back('\\');
      out.push_back(short_escape(*p));
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      char buf[6] = {'\\', 'u', '0', '0', kHex[(*p >> 4) & 0xf], kHex[*p & 0xf]};
      out.append(buf, 6);
    }
    run = p + 1;
  }
  out.append(run, static_cast<size_t>(end - run));
  out.push_back('"');
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

void append_optional_int(std::string& out, std::optional<int64_t> v) {
  if (!v) {
    out.append("null");
    return;
  }
  append_int(out, *v);
}

std::optional<std::string_view> json_integer_digits(std::string_view raw, std::string& buffer,
                                                    size_t max_digits) {
  bool negative = raw.starts_with('-');
  if (negative) raw.remove_prefix(1);
  size_t dot = raw.find('.'), e = raw.find_first_of("eE");
  std::string_view whole = raw.substr(0, std::min(dot, e));
  std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : raw.substr(dot + 1, e - dot - 1);
  int64_t exponent = 0;
  if (e != std::string_view::npos) {
    std::string_view x = raw.substr(e + 1);
    bool down = x.starts_with('-');
    if (x.starts_with('-') || x.starts_with('+')) x.remove_prefix(1);
    for (char c : x) exponent = std::min<int64_t>(exponent * 10 + (c - '0'), 1000);
    if (down) exponent = -exponent;
  }
  buffer.assign(whole);
  buffer.append(fraction);
  exponent -= static_cast<int64_t>(fraction.size());
  buffer.erase(0, std::min(buffer.find_first_not_of('0'), buffer.size()));
  if (buffer.empty()) {
    buffer.assign(1, '0');
    return std::string_view(buffer);
  }
  if (negative) return std::nullopt;
  for (; exponent < 0; ++exponent) {
    if (buffer.back() != '0') return std::nullopt;
    buffer.pop_back();
  }
  if (buffer.size() + static_cast<size_t>(exponent) > max_digits) return std::nullopt;
  buffer.append(static_cast<size_t>(exponent), '0');
  return std::string_view(buffer);
}

void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out.append("null");  // JSON has no NaN or infinity
    return;
  }
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    append_int(out, static_cast<int64_t>(v));
    return;
  }
  char buf[32];
  // Outside [-2^63, 2^64) an integral double would come out as an integer
  // that fits neither int64 nor uint64, which simdjson (every kpipe reader)
  // refuses: an exponent keeps it readable downstream.
  auto r = v >= 18446744073709551616.0 || v < -9223372036854775808.0
               ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific)
               : std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

void append_base64(std::string& out, std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t i = 0;
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  out.reserve(out.size() + (n + 2) / 3 * 4);
  for (; i + 2 < n; i += 3) {
    uint32_t v = (b[i] << 16) | (b[i + 1] << 8) | b[i + 2];
    out.push_back(kAlphabet[v >> 18]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back(kAlphabet[v & 63]);
  }
  if (i + 1 == n) {
    uint32_t v = b[i] << 16;
    out.push_back(kAlphabet[v >> 18]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.append("==");
  } else if (i + 2 == n) {
    uint32_t v = (b[i] << 16) | (b[i + 1] << 8);
    out.push_back(kAlphabet[v >> 18]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back('=');
  }
}

Expected<std::string> decode_base64(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return data_error("invalid base64: bad length");
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = value(c);
    if (v < 0) return data_error("invalid base64: unexpected character");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

void append_minified(std::string& out, std::string_view json) {
  // Most payloads hold no insignificant whitespace at all; copying runs
  // between it beats simdjson::minify by a wide margin on short records.
  const char* p = json.data();
  const char* end = p + json.size();
  const char* run = p;
  size_t at = out.size();
  out.resize(at + json.size());
  char* dst = out.data() + at;
  auto flush_run = [&](const char* upto) {
    size_t n = static_cast<size_t>(upto - run);
    std::memcpy(dst, run, n);
    dst += n;
  };
  while (p < end) {
    char c = *p;
    if (c == '"') {
      // Skip the string, escapes included. Strings in payloads are short:
      // a plain loop beats memchr's call overhead here.
      ++p;
      while (p < end) {
        char d = *p++;
        if (d == '"') break;
        if (d == '\\' && p < end) ++p;
      }
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      flush_run(p);
      while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) ++p;
      run = p;
      continue;
    }
    ++p;
  }
  flush_run(end);
  out.resize(static_cast<size_t>(dst - out.data()));
}

struct PayloadEncoder::Impl {
  simdjson::dom::parser parser;
  std::unique_ptr<char[]> scratch;
  size_t cap = 0;

  simdjson::error_code validate(std::string_view bytes) {
    if (bytes.size() + simdjson::SIMDJSON_PADDING > cap) {
      cap = std::max<size_t>(bytes.size() + simdjson::SIMDJSON_PADDING, 2 * cap);
      scratch.reset(new char[cap]);
    }
    std::memcpy(scratch.get(), bytes.data(), bytes.size());
    std::memset(scratch.get() + bytes.size(), 0, simdjson::SIMDJSON_PADDING);
    return check_text(parser, std::string_view(scratch.get(), bytes.size()));
  }
};

PayloadEncoder::PayloadEncoder() : impl_(std::make_unique<Impl>()) {}
PayloadEncoder::~PayloadEncoder() = default;

bool PayloadEncoder::is_json(std::string_view bytes) {
  return !bytes.empty() && impl_->validate(bytes) == simdjson::SUCCESS;
}

Status PayloadEncoder::check(std::string_view bytes) {
  auto err = impl_->validate(bytes);
  if (err) return data_error(explain(err, bytes));
  return {};
}

PayloadEncoder::Kind PayloadEncoder::append(std::string& out, std::string_view bytes) {
  if (is_json(bytes)) {
    append_minified(out, bytes);
    return Kind::kJson;
  }
  if (!is_valid_utf8(bytes)) return Kind::kBinary;
  append_json_string(out, bytes);
  return Kind::kString;
}

}  // namespace kpipe
