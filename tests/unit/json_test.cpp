#include "kpipe/json.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <simdjson.h>

#include "helpers.h"

using namespace kpipe;
using kpipe::test::Padded;

namespace {

// --- helpers ----------------------------------------------------------------

struct Step {
  std::string key;
  bool has_key;
  bool has_index;
  uint64_t index;
};

std::vector<Step> steps_of(std::string_view text) {
  auto p = FieldPath::parse(text);
  INFO("path: " << text);
  if (!p) FAIL("refused: " << p.error().message);
  CHECK(p->text() == text);
  std::vector<Step> out;
  for (const auto& s : p->steps()) out.push_back({s.key, s.has_key, s.has_index, s.index});
  return out;
}

bool operator==(const Step& a, const Step& b) {
  return a.key == b.key && a.has_key == b.has_key && a.has_index == b.has_index &&
         a.index == b.index;
}
std::ostream& operator<<(std::ostream& os, const Step& s) {
  os << "{";
  if (s.has_key) os << "key '" << s.key << "'";
  if (s.has_index) os << (s.has_key ? " " : "") << "index " << s.index;
  return os << "}";
}

Step key(std::string k) {
  return {std::move(k), true, false, 0};
}
Step index(uint64_t i) {
  return {"", false, true, i};
}
Step either(std::string k, uint64_t i) {
  return {std::move(k), true, true, i};
}

std::string path_error(std::string_view text) {
  auto p = FieldPath::parse(text);
  INFO("path: " << text);
  if (p) FAIL("accepted");
  CHECK(p.error().status == ExitStatus::kUsage);
  return p.error().message;
}

// Reads one line with the given paths, returning every slot; the views in
// the fields point into `keep`, which the caller holds.
struct Read {
  Status status;
  std::vector<JsonField> fields;
  JsonType root = JsonType::kMissing;
};

class Fixture {
 public:
  Read read(std::string_view line, const std::vector<std::string>& paths) {
    FieldSet set;
    for (const auto& p : paths) set.add(FieldPath::parse(p).value());
    lines_.emplace_back(std::make_unique<Padded>(line));
    Read r;
    r.status = reader_.read(lines_.back()->view(), set, r.fields);
    r.root = reader_.root_type();
    return r;
  }
  std::vector<JsonField> ok(std::string_view line, const std::vector<std::string>& paths) {
    Read r = read(line, paths);
    INFO("line: " << line);
    if (!r.status.ok()) FAIL("refused: " << r.status.error().message);
    return r.fields;
  }
  std::string error(std::string_view line, const std::vector<std::string>& paths) {
    Read r = read(line, paths);
    INFO("line: " << line);
    if (r.status.ok()) FAIL("accepted");
    CHECK(r.status.error().status == ExitStatus::kDataError);
    return r.status.error().message;
  }

 private:
  JsonReader reader_;
  std::vector<std::unique_ptr<Padded>> lines_;
};

// An escaper written from RFC 8259 alone, to check append_json_string's
// output without reusing its table.
std::string reference_escape(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// A random valid UTF-8 string weighted towards what needs escaping.
std::string random_text(std::mt19937& rng, size_t max_len) {
  std::string out;
  size_t len = rng() % (max_len + 1);
  for (size_t i = 0; i < len; ++i) {
    switch (rng() % 6) {
      case 0:
        out.push_back(static_cast<char>(rng() % 0x20));
        break;
      case 1:
        out.push_back("\"\\/ \x7f"[rng() % 5]);
        break;
      case 2:
        append_utf8(out, 0x80 + rng() % (0xD800 - 0x80));
        break;
      case 3:
        append_utf8(out, 0x10000 + rng() % 0x100000);
        break;
      default:
        out.push_back(static_cast<char>(0x20 + rng() % 0x5f));
        break;
    }
  }
  return out;
}

std::string base64(std::string_view bytes) {
  std::string out;
  append_base64(out, bytes);
  return out;
}

std::string minified(std::string_view json) {
  std::string out = "prefix:";
  append_minified(out, json);
  REQUIRE(out.substr(0, 7) == "prefix:");
  return out.substr(7);
}

std::string dbl(double v) {
  std::string out;
  append_double(out, v);
  return out;
}

}  // namespace

// --- FieldPath ---------------------------------------------------------------

TEST_CASE("FieldPath: every form of kpipe(7), FIELD PATHS", "[json][path]") {
  CHECK(steps_of(".value.user_id") == std::vector<Step>{key("value"), key("user_id")});
  CHECK(steps_of("value.user_id") == std::vector<Step>{key("value"), key("user_id")});
  CHECK(steps_of(".items[0].sku") == std::vector<Step>{key("items"), index(0), key("sku")});
  CHECK(steps_of(".\"dotted.name\"") == std::vector<Step>{key("dotted.name")});
  CHECK(steps_of("/value/user_id") == std::vector<Step>{key("value"), key("user_id")});
}

TEST_CASE("FieldPath: the whole line, indices, quoted and escaped segments", "[json][path]") {
  CHECK(steps_of(".").empty());
  CHECK(steps_of("[3]") == std::vector<Step>{index(3)});
  CHECK(steps_of(".[3]") == std::vector<Step>{index(3)});
  CHECK(steps_of(".m[1][20]") == std::vector<Step>{key("m"), index(1), index(20)});
  CHECK(steps_of(".a.\"b.c\".d") == std::vector<Step>{key("a"), key("b.c"), key("d")});
  CHECK(steps_of(".\"a\\\"b\"") == std::vector<Step>{key("a\"b")});
  CHECK(steps_of(".\"a\\\\b\"") == std::vector<Step>{key("a\\b")});
  CHECK(steps_of(".\"[x]\"[1]") == std::vector<Step>{key("[x]"), index(1)});
  CHECK(steps_of(".$kpipe") == std::vector<Step>{key("$kpipe")});
  CHECK(steps_of(".\"\"") == std::vector<Step>{key("")});
  CHECK(steps_of(".0") == std::vector<Step>{key("0")});
  CHECK(steps_of(".é.ü") == std::vector<Step>{key("é"), key("ü")});
}

TEST_CASE("FieldPath: JSON Pointers per RFC 6901", "[json][path]") {
  CHECK(steps_of("/a~1b/~0c~01") == std::vector<Step>{key("a/b"), key("~c~1")});
  // "/0" may name a key or an index; "01" and "-" are keys only.
  CHECK(steps_of("/items/0/sku") == std::vector<Step>{key("items"), either("0", 0), key("sku")});
  CHECK(steps_of("/items/01") == std::vector<Step>{key("items"), key("01")});
  CHECK(steps_of("/items/-") == std::vector<Step>{key("items"), key("-")});
  CHECK(steps_of("/items/12") == std::vector<Step>{key("items"), either("12", 12)});
  CHECK(steps_of("/") == std::vector<Step>{key("")});
  CHECK(steps_of("/a//b") == std::vector<Step>{key("a"), key(""), key("b")});
  CHECK(steps_of("/a.b") == std::vector<Step>{key("a.b")});
}

TEST_CASE("FieldPath: every invalid form, with its message", "[json][path]") {
  CHECK(path_error("") == "invalid field path '': it is empty");
  CHECK(path_error("..") == "invalid field path '..': empty segment");
  CHECK(path_error(".a..b") == "invalid field path '.a..b': empty segment");
  CHECK(path_error("a..") == "invalid field path 'a..': empty segment");
  CHECK(path_error(".a.") == "invalid field path '.a.': it ends with '.'");
  CHECK(path_error(".a[") == "invalid field path '.a[': '[' without ']'");
  CHECK(path_error(".a[0") == "invalid field path '.a[0': '[' without ']'");
  CHECK(path_error(".a[]") == "invalid field path '.a[]': an index must be a non-negative integer");
  CHECK(path_error(".a[-1]") ==
        "invalid field path '.a[-1]': an index must be a non-negative integer");
  CHECK(path_error(".a[x]") ==
        "invalid field path '.a[x]': an index must be a non-negative integer");
  CHECK(path_error(".a[1.5]") ==
        "invalid field path '.a[1.5]': an index must be a non-negative integer");
  CHECK(path_error(".a\"b") == "invalid field path '.a\"b': quote or ']' inside a segment");
  CHECK(path_error(".a]") == "invalid field path '.a]': quote or ']' inside a segment");
  CHECK(path_error(".\"abc") == "invalid field path '.\"abc': unterminated quoted segment");
  CHECK(path_error(".\"abc\\\"") == "invalid field path '.\"abc\\\"': unterminated quoted segment");
  CHECK(path_error(".\"a\"b") ==
        "invalid field path '.\"a\"b': expected '.' or '[' after a segment");
  CHECK(path_error(".a[0]b") == "invalid field path '.a[0]b': expected '.' or '[' after a segment");
  CHECK(path_error("/a~2") == "invalid field path '/a~2': '~' must be followed by 0 or 1");
  CHECK(path_error("/a~") == "invalid field path '/a~': '~' must be followed by 0 or 1");
}

TEST_CASE("FieldPath: an index too large for 64 bits is refused, not read as 0", "[json][path]") {
  CHECK(steps_of(".a[18446744073709551615]") ==
        std::vector<Step>{key("a"), index(18446744073709551615u)});
  CHECK(path_error(".a[18446744073709551616]") ==
        "invalid field path '.a[18446744073709551616]': an index is too large");
  CHECK(path_error(".a[99999999999999999999999]") ==
        "invalid field path '.a[99999999999999999999999]': an index is too large");
}

TEST_CASE("FieldPath: last_key names the last object key", "[json][path]") {
  CHECK(FieldPath::parse(".value.amount")->last_key() == "amount");
  CHECK(FieldPath::parse(".\"a.b\"")->last_key() == "a.b");
  CHECK(FieldPath::parse(".items[0]")->last_key().empty());
  CHECK(FieldPath::parse(".")->last_key().empty());
  CHECK(FieldPath::parse("/v/x~1y")->last_key() == "x/y");
}

// --- FieldSet and JsonReader ---------------------------------------------------

TEST_CASE("JsonReader: nested paths and array indices", "[json][reader]") {
  Fixture fx;
  auto f = fx.ok(
      R"({"topic":"t","value":{"user_id":"u1","n":5,"items":[{"sku":"a"},{"sku":"b","q":2}]}})",
      {".value.user_id", ".value.n", ".value.items[1].sku", "/value/items/0/sku",
       ".value.items[2].sku", ".value.items[1]", ".topic"});
  CHECK(f[0].type == JsonType::kString);
  CHECK(f[0].str == "u1");
  CHECK(f[0].raw == "\"u1\"");
  CHECK(f[1].type == JsonType::kNumber);
  CHECK(f[1].is_integer);
  CHECK(f[1].integer == 5);
  CHECK(f[1].number == 5.0);
  CHECK(f[1].raw == "5");
  CHECK(f[2].str == "b");
  CHECK(f[3].str == "a");
  CHECK(f[4].type == JsonType::kMissing);
  CHECK(f[5].type == JsonType::kObject);
  CHECK(f[5].raw == R"({"sku":"b","q":2})");
  CHECK(f[6].str == "t");
}

TEST_CASE("JsonReader: a pointer step reads an object key or an array index", "[json][reader]") {
  Fixture fx;
  auto f = fx.ok(R"({"a":{"0":"key"},"b":["index"]})", {"/a/0", "/b/0", ".a[0]", ".b.0"});
  CHECK(f[0].str == "key");
  CHECK(f[1].str == "index");
  CHECK(f[2].type == JsonType::kMissing);  // .a is an object: [0] finds nothing
  CHECK(f[3].type == JsonType::kMissing);  // .b is an array: .0 is a key
}

TEST_CASE("FieldSet: shared prefixes are one walk", "[json][reader]") {
  FieldSet set;
  for (const char* p : {".value.a", ".value.b", "value.c.d", ".value.c.e", ".key"})
    set.add(FieldPath::parse(p).value());
  CHECK(set.size() == 5);
  CHECK(set.aliases().empty());
  Fixture fx;
  auto f = fx.ok(R"({"key":"k","value":{"c":{"e":[1],"d":null},"b":true,"a":-1.5}})",
                 {".value.a", ".value.b", "value.c.d", ".value.c.e", ".key"});
  CHECK(f[0].number == -1.5);
  CHECK_FALSE(f[0].is_integer);
  CHECK(f[1].type == JsonType::kBool);
  CHECK(f[1].boolean);
  CHECK(f[1].raw == "true");
  CHECK(f[2].type == JsonType::kNull);
  CHECK(f[2].raw == "null");
  CHECK(f[3].type == JsonType::kArray);
  CHECK(f[3].raw == "[1]");
  CHECK(f[4].str == "k");
}

TEST_CASE("JsonReader: a path that is both a leaf and a prefix", "[json][reader]") {
  Fixture fx;
  std::string line = R"({"value":{"ts":1795946400010,"x":[1, 2],"s":"v"},"after":3})";
  SECTION("leaf first") {
    auto f = fx.ok(line, {".value", ".value.ts", ".value.x[1]", ".after"});
    CHECK(f[0].type == JsonType::kObject);
    CHECK(f[0].raw == R"({"ts":1795946400010,"x":[1, 2],"s":"v"})");
    CHECK(f[1].integer == 1795946400010);
    CHECK(f[2].integer == 2);
    CHECK(f[3].integer == 3);
  }
  SECTION("prefix first") {
    auto f = fx.ok(line, {".value.s", ".value", ".after"});
    CHECK(f[0].str == "v");
    CHECK(f[1].raw == R"({"ts":1795946400010,"x":[1, 2],"s":"v"})");
    CHECK(f[2].integer == 3);
  }
  SECTION("the whole line and a field") {
    auto f = fx.ok(line, {".", ".after", ".value.s"});
    CHECK(f[0].type == JsonType::kObject);
    CHECK(f[0].raw == line);
    CHECK(f[1].integer == 3);
    CHECK(f[2].str == "v");
  }
  SECTION("a leaf that is a scalar has nothing below it") {
    auto f = fx.ok(R"({"value":7})", {".value", ".value.ts"});
    CHECK(f[0].integer == 7);
    CHECK(f[1].type == JsonType::kMissing);
  }
}

TEST_CASE("JsonReader: a leaf and prefix walked once keeps its exact text", "[json][reader]") {
  // Its text runs from its first byte to where the walk left the
  // document: blanks after it, before the next comma, are not part of it.
  Fixture fx;
  std::string line = R"({"value" : { "a" : 1 }  , "arr":[ {"k":1} , 2 ]	,"z":{}})";
  auto f = fx.ok(line, {".value", ".value.a", ".arr", ".arr[0].k", ".z", ".z.q", ".value.q"});
  CHECK(f[0].raw == R"({ "a" : 1 })");
  CHECK(f[1].integer == 1);
  CHECK(f[2].type == JsonType::kArray);
  CHECK(f[2].raw == R"([ {"k":1} , 2 ])");
  CHECK(f[3].integer == 1);
  CHECK(f[4].raw == "{}");
  CHECK(f[5].type == JsonType::kMissing);
  CHECK(f[6].type == JsonType::kMissing);
  // The last member of the line, its object closing the line's.
  auto g = fx.ok(R"({"n":1,"value":{"user_id":"u1","ts":5}})", {".value", ".value.user"});
  CHECK(g[0].raw == R"({"user_id":"u1","ts":5})");
  CHECK(g[1].type == JsonType::kMissing);
}

TEST_CASE("JsonReader: leaves that are prefixes at several depths", "[json][reader]") {
  // A nested level must not disturb the level that is still walking above
  // it.
  Fixture fx;
  std::string line = R"({"a":{"b":{"c":1,"z":0},"d":2},"e":3})";
  auto f = fx.ok(line, {".a", ".a.b", ".a.b.c", ".a.d", ".e"});
  CHECK(f[0].raw == R"({"b":{"c":1,"z":0},"d":2})");
  CHECK(f[1].raw == R"({"c":1,"z":0})");
  CHECK(f[2].integer == 1);
  CHECK(f[3].type == JsonType::kNumber);
  CHECK(f[3].integer == 2);
  CHECK(f[4].integer == 3);
  auto g = fx.ok(line, {".", ".a", ".a.d", ".e"});
  CHECK(g[0].raw == line);
  CHECK(g[1].raw == R"({"b":{"c":1,"z":0},"d":2})");
  CHECK(g[2].integer == 2);
  CHECK(g[3].integer == 3);
}

TEST_CASE("JsonReader: the same path twice fills both slots", "[json][reader]") {
  FieldSet set;
  CHECK(set.add(FieldPath::parse(".a.b").value()) == 0);
  CHECK(set.add(FieldPath::parse("a.b").value()) == 1);
  CHECK(set.add(FieldPath::parse("/a/b").value()) == 2);
  REQUIRE(set.aliases().size() == 2);
  CHECK(set.aliases()[0] == std::pair<size_t, size_t>{0, 1});
  CHECK(set.aliases()[1] == std::pair<size_t, size_t>{0, 2});
  Fixture fx;
  auto f = fx.ok(R"({"a":{"b":"x"}})", {".a.b", "a.b", "/a/b"});
  CHECK(f[0].str == "x");
  CHECK(f[1].str == "x");
  CHECK(f[2].str == "x");
}

TEST_CASE("JsonReader: missing fields and paths through scalars are kMissing", "[json][reader]") {
  Fixture fx;
  auto f = fx.ok(R"({"a":5,"s":"text","n":null,"arr":[1],"o":{}})",
                 {".nope", ".a.b", ".s[0]", ".n.x", ".arr[1]", ".arr.x", ".o.x", ".a[0]"});
  for (size_t i = 0; i < f.size(); ++i) {
    INFO("slot " << i);
    CHECK(f[i].type == JsonType::kMissing);
    CHECK(f[i].raw.empty());
  }
}

TEST_CASE("JsonReader: with duplicate keys the first wins", "[json][reader]") {
  Fixture fx;
  auto f = fx.ok(R"({"a":1,"b":{"c":"first"},"a":2,"b":{"c":"second"}})", {".a", ".b.c"});
  CHECK(f[0].integer == 1);
  CHECK(f[1].str == "first");
}

TEST_CASE("JsonReader: numbers", "[json][reader]") {
  Fixture fx;
  auto f = fx.ok(R"({"max":9223372036854775807,"min":-9223372036854775808,)"
                 R"("u":18446744073709551615,)"
                 R"("big":9223372036854775808,"d":1.25,"e":1e3,"E":-2.5E-3,"z":-0,"frac":0.1})",
                 {".max", ".min", ".u", ".big", ".d", ".e", ".E", ".z", ".frac"});
  CHECK(f[0].is_integer);
  CHECK(f[0].integer == std::numeric_limits<int64_t>::max());
  CHECK(f[1].is_integer);
  CHECK(f[1].integer == std::numeric_limits<int64_t>::min());
  // Beyond int64: not an integer for kpipe, but a number, its text intact.
  CHECK(f[2].type == JsonType::kNumber);
  CHECK_FALSE(f[2].is_integer);
  CHECK(f[2].number == 18446744073709551615.0);
  CHECK(f[2].raw == "18446744073709551615");
  CHECK_FALSE(f[3].is_integer);
  CHECK(f[3].number == 9223372036854775808.0);
  CHECK(f[4].number == 1.25);
  CHECK_FALSE(f[4].is_integer);
  CHECK(f[5].number == 1000.0);
  CHECK_FALSE(f[5].is_integer);
  CHECK(f[5].raw == "1e3");
  CHECK(f[6].number == -0.0025);
  CHECK(f[6].raw == "-2.5E-3");
  CHECK(f[7].number == 0.0);
  CHECK(f[8].number == 0.1);
}

TEST_CASE("JsonReader: decimals of more than 19 digits", "[json][reader]") {
  // Found by tests/fuzz (json_reader): simdjson 3.0's get_number() read
  // these as 0, where the tree (parse_json) and jq read the nearest double.
  Fixture fx;
  auto f = fx.ok(
      R"({"a":123456.7891023456789012345678901234567890,"b":-0.12345678901234567890123,"c":1.0000000000000000000001e5})",
      {".a", ".b", ".c"});
  CHECK(f[0].number == 123456.78910234568);
  CHECK_FALSE(f[0].is_integer);
  CHECK(f[1].number == -0.12345678901234568);
  CHECK(f[2].number == 100000.0);
  auto tree = parse_json(R"([123456.7891023456789012345678901234567890])");
  REQUIRE(tree.ok());
  CHECK(tree->items[0].number == 123456.78910234568);
}

TEST_CASE("JsonReader: numbers that do not fit", "[json][reader]") {
  Fixture fx;
  // Valid JSON beyond uint64: read as the nearest double, as jq does.
  auto f = fx.ok(R"({"n":123456789012345678901234567890})", {".n"});
  CHECK(f[0].type == JsonType::kNumber);
  CHECK_FALSE(f[0].is_integer);
  CHECK(f[0].number == 123456789012345678901234567890.0);
  CHECK(f[0].raw == "123456789012345678901234567890");
  // Beyond a double: a number all the same, its text kept, its value an
  // infinity that no program computes with (simdjson calls it malformed).
  f = fx.ok(R"({"n":1e400,"m":-1E+309 ,"big":-)" + std::string(400, '9') + R"(,"after":7})",
            {".n", ".m", ".big", ".after"});
  CHECK(f[0].type == JsonType::kNumber);
  CHECK_FALSE(f[0].is_integer);
  CHECK(f[0].number == std::numeric_limits<double>::infinity());
  CHECK(f[0].raw == "1e400");
  CHECK(f[1].number == -std::numeric_limits<double>::infinity());
  CHECK(f[1].raw == "-1E+309");
  CHECK(f[2].number == -std::numeric_limits<double>::infinity());
  CHECK(f[2].raw.size() == 401);
  CHECK(f[3].integer == 7);  // the walk goes on after a number simdjson left unread
  CHECK(fx.error(R"({"n":01})", {".n"}) == "not valid JSON: malformed number");
  CHECK(fx.error(R"({"n":1.})", {".n"}) == "not valid JSON: malformed number");
  CHECK(fx.error(R"({"n":-})", {".n"}) == "not valid JSON: malformed number");
}

TEST_CASE("JsonReader: strings with escapes and unicode", "[json][reader]") {
  Fixture fx;
  auto f = fx.ok(R"({"s":"a\"b\\c\/d\n\t\u00e9\ud83d\ude00\u0000end","raw":"é😀"})", {".s", ".raw"});
  CHECK(f[0].type == JsonType::kString);
  CHECK(f[0].str == std::string("a\"b\\c/d\n\t\xc3\xa9\xf0\x9f\x98\x80\0end", 19));
  CHECK(f[0].raw == R"("a\"b\\c\/d\n\t\u00e9\ud83d\ude00\u0000end")");
  CHECK(f[1].str == "é😀");
  CHECK(fx.error(R"({"s":"\x"})", {".s"}) == "not valid JSON: malformed string escape");
  CHECK(fx.error(R"({"s":"\ud83d"})", {".s"}) == "not valid JSON: a lone surrogate \\ud83d");
}

TEST_CASE("JsonReader: raw text of objects and arrays keeps their whitespace", "[json][reader]") {
  Fixture fx;
  auto f = fx.ok(R"({ "v" : { "a" : [ 1 , 2 ] ,"s":"x y" } , "w" : [ ] , "n" : 12 })",
                 {".v", ".w", ".n"});
  CHECK(f[0].raw == R"({ "a" : [ 1 , 2 ] ,"s":"x y" })");
  CHECK(f[1].raw == "[ ]");
  CHECK(f[2].raw == "12");
}

TEST_CASE("JsonReader: content after the value is refused", "[json][reader]") {
  Fixture fx;
  // simdjson sees this one as an unfinished object: named all the same.
  CHECK(fx.error(R"({"a":1} x)", {".a"}) == "not valid JSON: content after the value");
  CHECK(fx.error(std::string("{\"a\":1}\0", 8), {".a"}) ==
        "not valid JSON: a NUL byte after the value");
  CHECK(fx.error(R"({"a":1}{"b":2})", {".a"}) == "not valid JSON: content after the value");
  CHECK(fx.error(R"({"a":1}})", {}) == "not valid JSON: content after the value");
  CHECK(fx.error("1 2", {"."}) == "not valid JSON: content after the value");
  CHECK(fx.error(R"([1] [2])", {".[0]"}) == "not valid JSON: content after the value");
  // Whitespace after the value is fine.
  CHECK(fx.ok("{\"a\":1} \t ", {".a"})[0].integer == 1);
}

TEST_CASE("JsonReader: truncated JSON is refused", "[json][reader]") {
  Fixture fx;
  for (const char* line :
       {R"({"a":1)", R"({"a":)", R"({"a")", R"({"a":[1,2)", R"({"a":{"b":1})", "{", "["}) {
    std::string why = fx.error(line, {".a"});
    INFO(line << " -> " << why);
    CHECK(why.starts_with("not valid JSON: "));
  }
  CHECK(fx.error(R"({"a":"abc)", {".a"}) == "not valid JSON: unclosed string");
}

TEST_CASE("JsonReader: invalid UTF-8 anywhere in the line is refused", "[json][reader]") {
  Fixture fx;
  CHECK(fx.error("{\"a\":\"\xff\"}", {".a"}) == "not valid JSON: invalid UTF-8");
  // Even in a value that no path reads.
  CHECK(fx.error("{\"a\":1,\"b\":\"\xc3\x28\"}", {".a"}) == "not valid JSON: invalid UTF-8");
  // A surrogate.
  CHECK(fx.error("{\"a\":\"\xed\xa0\x80\"}", {".a"}) == "not valid JSON: invalid UTF-8");
}

TEST_CASE("JsonReader: an unescaped control character in a string that is read", "[json][reader]") {
  Fixture fx;
  CHECK(fx.error("{\"a\":\"x\ty\"}", {".a"}) ==
        "not valid JSON: unescaped control character in a string");
  CHECK(fx.error(std::string("{\"a\":\"x\0y\"}", 11), {".a"}) ==
        "not valid JSON: unescaped control character in a string");
}

TEST_CASE("JsonReader: very deep nesting is neither a crash nor walked", "[json][reader]") {
  Fixture fx;
  // Valid however deep: what no path walks into is skipped by bracket
  // counting. The tree parser, which builds it all, refuses it, and so does
  // the reader for a value taken whole, which it checks whole.
  std::string deep = "{\"a\":" + std::string(5000, '[') + std::string(5000, ']') + ",\"b\":2}";
  auto f = fx.ok(deep, {".a.x", ".b"});
  CHECK(f[0].type == JsonType::kMissing);
  CHECK(f[1].integer == 2);
  CHECK(fx.error(deep, {".a[0][0]", ".b"}) == "not valid JSON: nesting deeper than 1024");
  CHECK(parse_json(deep).error().message == "not valid JSON: nesting deeper than 1024");
  std::string deep_enough = "{\"a\":" + std::string(1000, '[') + std::string(1000, ']') + "}";
  CHECK(fx.ok(deep_enough, {".a"})[0].raw.size() == 2 * 1000);
  // Where a value taken whole becomes too deep, as for the tree parser.
  for (size_t n : {1023, 1024, 1025}) {
    INFO(n);
    std::string value = std::string(n, '[') + std::string(n, ']');
    CHECK(fx.read("{\"a\":" + value + "}", {".a"}).status.ok() == parse_json(value).ok());
    CHECK(fx.read("{\"a\":" + value + "}", {".a"}).status.ok() == (n <= 1024));
  }
  std::string unbalanced = "{\"a\":" + std::string(5000, '[') + std::string(4999, ']') + "}";
  CHECK(fx.error(unbalanced, {".b"}).starts_with("not valid JSON: "));
  // Moderately deep is fine, along the path and beside it.
  std::string ok = "{\"x\":" + std::string(500, '[') + "7" + std::string(500, ']') + ",\"y\":1}";
  CHECK(fx.ok(ok, {".y"})[0].integer == 1);
  CHECK(fx.ok(ok, {".x[0][0][0]"})[0].type == JsonType::kArray);
}

TEST_CASE("JsonReader: empty and blank lines are not JSON", "[json][reader]") {
  Fixture fx;
  CHECK(fx.error("", {".a"}) == "not valid JSON: empty");
  CHECK(fx.error("   ", {".a"}) == "not valid JSON: empty");
}

TEST_CASE("JsonReader: a scalar or array at the top level", "[json][reader]") {
  Fixture fx;
  Read r = fx.read("42", {".", ".a"});
  REQUIRE(r.status.ok());
  CHECK(r.root == JsonType::kNumber);
  CHECK(r.fields[0].integer == 42);
  CHECK(r.fields[0].raw == "42");
  CHECK(r.fields[1].type == JsonType::kMissing);
  r = fx.read("\"s\"", {".a"});
  REQUIRE(r.status.ok());
  CHECK(r.root == JsonType::kString);
  r = fx.read("null", {});
  REQUIRE(r.status.ok());
  CHECK(r.root == JsonType::kNull);
  r = fx.read("[true, {\"k\":\"v\"}]", {"[1].k", "/0"});
  REQUIRE(r.status.ok());
  CHECK(r.root == JsonType::kArray);
  CHECK(r.fields[0].str == "v");
  CHECK(r.fields[1].type == JsonType::kBool);
  CHECK(r.fields[1].boolean);
  CHECK(fx.error("tru", {}) == "not valid JSON: 'tru' is not a JSON value");
  CHECK(fx.error("nul", {"."}) == "not valid JSON: 'nul' is not a JSON value");
  // A scalar beyond a double on its own, and with something after it.
  r = fx.read("1e309", {"."});
  REQUIRE(r.status.ok());
  CHECK(r.fields[0].raw == "1e309");
  CHECK(fx.ok("-1e309 \t", {"."})[0].raw == "-1e309");
  CHECK(fx.error("1e309 x", {"."}) == "not valid JSON: content after the value");
  CHECK(fx.error("1e309 x", {}) == "not valid JSON: content after the value");
}

TEST_CASE("JsonReader: null with one blank after it", "[json][reader]") {
  // Found by tests/fuzz (guard): simdjson 3.0's root null check reads one
  // byte too far, and "null " was "invalid literal" to every filter.
  Fixture fx;
  for (std::string line : {"null ", "null\t", "   null ", "null  "}) {
    INFO(line);
    Read r = fx.read(line, {"."});
    REQUIRE(r.status.ok());
    CHECK(r.root == JsonType::kNull);
    CHECK(r.fields[0].type == JsonType::kNull);
    CHECK(r.fields[0].raw == "null");
    CHECK(fx.read(line, {}).status.ok());
  }
  CHECK(fx.error("null x", {}) == "not valid JSON: content after the value");
  CHECK(fx.error("nullx ", {"."}) == "not valid JSON: 'nullx' is not a JSON value");
  CHECK(fx.error("null null", {}) == "not valid JSON: content after the value");
}

TEST_CASE("JsonReader: true and false with blanks after them", "[json][reader]") {
  // Found by tests/fuzz (json_reader): "\n   true   " was "malformed
  // structure" to every filter, though the validator accepts it.
  Fixture fx;
  for (std::string line : {"\n          true   ", "true   ", " false   ", "false\t\t"}) {
    INFO(line);
    Read r = fx.read(line, {"."});
    REQUIRE(r.status.ok());
    CHECK(r.root == JsonType::kBool);
    CHECK(r.fields[0].boolean == (line.find("true") != std::string::npos));
    CHECK(fx.read(line, {".a"}).status.ok());
  }
  CHECK(fx.error("true x", {}) == "not valid JSON: content after the value");
  CHECK(fx.error("truex ", {"."}) == "not valid JSON: 'truex' is not a JSON value");
  CHECK(fx.error("tru ", {}) == "not valid JSON: 'tru' is not a JSON value");
}

TEST_CASE("JsonReader: an unread value that breaks the top level", "[json][reader]") {
  // Found by tests/fuzz (json_reader): simdjson 3.0 skips an unread string
  // that a ':' follows as if it were a key, and a ':', ',' or closing
  // bracket where a value starts as if it were a value, so an extra '}'
  // closed the line's top level: {"a":1,"b":"":2}} passed every filter
  // reading .a.
  Fixture fx;
  struct Case {
    const char* line;
    std::vector<std::string> paths;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"a":1,"b":"":2}})", {".a"}},        // an unread member
           {R"({"a":1,"b":"x":2}})", {}},           // no path at all
           {R"({"a":1,"b":"":2,"c":4}})", {".c"}},  // the path after it
           {R"({"a":"x":2}})", {".a"}},             // the member read
           {R"({"a":"x","a":"y":2}})", {".a"}},     // a repeated key
           {R"({"a":"x":2}})", {".a.b"}},           // a path through a string
           {R"({"a":{"b":"":2}}})", {".a.c"}},      // one level down
           {R"([1,"":2]])", {".[0]"}},              // an unread element
           {R"([1,"x":2]])", {".[1]"}},             // the element read
           {R"({"a":[1,"x":2]]})", {".a[0]"}},      // an element on a path
           {R"([1, :"y"}])", {}},                   // a ':' for a value
           {R"([tAet,}])", {".u"}},                 // a '}' for a value
           {R"({"a":1,"b":,"c":2}})", {".a"}},      // a ',' for a value
           {R"({"a":1,"b":]})", {".a"}},            // a ']' for a value
       }) {
    std::string why = fx.error(c.line, c.paths);
    INFO(c.line);
    CHECK(why.rfind("not valid JSON: ", 0) == 0);
  }
  // Strings on and off the paths still read as before.
  auto f = fx.ok(R"({"s":"x","t":"y\"z","u":["p","q"],"v":{"w":"r"}})", {".t", ".u[1]", ".v.w"});
  CHECK(f[0].str == "y\"z");
  CHECK(f[1].str == "q");
  CHECK(f[2].str == "r");
  CHECK(fx.ok(R"({"a":"x","a":"y"})", {".a"})[0].str == "x");
  CHECK(fx.ok(R"({"a":"x"})", {".a.b"})[0].type == JsonType::kMissing);
  // A malformed value no path reaches still passes (kpipe(7), LINES).
  CHECK(fx.ok(R"({"a":1,"b":tAet,"c":[nul]})", {".a"})[0].integer == 1);
}

TEST_CASE("JsonReader: an object or array taken whole is checked whole", "[json][reader]") {
  // Found by tests/fuzz (json_reader): raw_json() skips by bracket
  // counting, so [}] read as an array and {"value":{"x":nul}} gave
  // kproduce a value that is not JSON.
  Fixture fx;
  CHECK(fx.error("[}]", {"."}).rfind("not valid JSON: ", 0) == 0);
  CHECK(fx.error(R"({"value":{"x":nul}})", {".value"}) ==
        "not valid JSON: 'nul' is not a JSON value");
  CHECK(fx.error(R"({"value":[1,{"b":tru}]})", {".value"}) ==
        "not valid JSON: 'tru' is not a JSON value");
  CHECK(fx.error(R"({"value":{"x":1 2},"k":1})", {".value"}).rfind("not valid JSON: ", 0) == 0);
  CHECK(fx.error(R"({"o":{"a":{"x":[1}]}}})", {".o.a"}).rfind("not valid JSON: ", 0) == 0);
  // Both a leaf and a prefix (kjoin's --as and a path under it).
  CHECK(fx.error(R"({"o":{"a":1,"b":{"x":nul}}})", {".o", ".o.a"}) ==
        "not valid JSON: 'nul' is not a JSON value");
  // The same malformed value where no path takes it still passes.
  CHECK(fx.ok(R"({"value":{"x":nul},"k":1})", {".k"})[0].integer == 1);
  // Numbers of any size are JSON, inside a value taken whole too.
  auto f = fx.ok(R"({"value":{"big":1e400,"n":[123456789012345678901234567890]}})", {".value"});
  CHECK(f[0].raw == R"({"big":1e400,"n":[123456789012345678901234567890]})");
  CHECK(fx.ok(R"( [ 1 , {"a" : [] } ]  )", {"."})[0].raw == R"([ 1 , {"a" : [] } ])");
}

TEST_CASE("JsonReader: one reader serves many lines and set sizes", "[json][reader]") {
  JsonReader reader;
  FieldSet two;
  two.add(FieldPath::parse(".a").value());
  two.add(FieldPath::parse(".b").value());
  FieldSet one;
  one.add(FieldPath::parse(".b").value());
  std::vector<JsonField> out;
  Padded l1(R"({"a":"x","b":1})");
  REQUIRE(reader.read(l1, two, out).ok());
  CHECK(out.size() == 2);
  Padded bad(R"({"a":)");
  CHECK_FALSE(reader.read(bad, two, out).ok());
  Padded l2(R"({"b":2})");
  REQUIRE(reader.read(l2, one, out).ok());
  REQUIRE(out.size() == 1);
  CHECK(out[0].integer == 2);
  REQUIRE(reader.read(l2, two, out).ok());
  CHECK(out[0].type == JsonType::kMissing);  // no stale value from line 1
  CHECK(out[1].integer == 2);
}

// --- control lines -------------------------------------------------------------

TEST_CASE("is_control_line: an object whose first key is $kpipe", "[json]") {
  CHECK(is_control_line(R"({"$kpipe":"checkpoint","id":1})"));
  CHECK(is_control_line(R"(  {  "$kpipe" : "x"})"));
  CHECK(is_control_line("\t{\t\"$kpipe\":1}"));
  CHECK_FALSE(is_control_line(R"({"a":1,"$kpipe":"checkpoint"})"));
  CHECK_FALSE(is_control_line(R"({"$kpipe2":1})"));
  CHECK_FALSE(is_control_line(R"({"$kpip":1})"));
  CHECK_FALSE(is_control_line(R"(["$kpipe"])"));
  CHECK_FALSE(is_control_line(R"("$kpipe")"));
  CHECK_FALSE(is_control_line(""));
  CHECK_FALSE(is_control_line("{"));
  CHECK_FALSE(is_control_line(R"({"$kpipe)"));
}

// --- parse_json ------------------------------------------------------------------

TEST_CASE("parse_json builds a tree that owns its data", "[json]") {
  std::string text =
      R"({"a":[1,-2,18446744073709551615,2.5,"s",true,false,null,{}],"b":{"c":"d"},"a":0})";
  auto v = parse_json(text);
  text.assign(text.size(), 'x');  // the tree must not point into the text
  REQUIRE(v.ok());
  CHECK(v->type == JsonType::kObject);
  REQUIRE(v->members.size() == 3);
  CHECK(v->members[0].first == "a");
  CHECK(v->members[2].first == "a");
  const JsonValue* a = v->find("a");
  REQUIRE(a != nullptr);
  REQUIRE(a->type == JsonType::kArray);
  REQUIRE(a->items.size() == 9);
  CHECK(a->items[0].is_integer);
  CHECK(a->items[0].integer == 1);
  CHECK(a->items[0].str == "1");
  CHECK(a->items[1].integer == -2);
  CHECK_FALSE(a->items[2].is_integer);
  CHECK(a->items[2].str == "18446744073709551615");
  CHECK(a->items[3].number == 2.5);
  CHECK_FALSE(a->items[3].is_integer);
  CHECK(a->items[4].type == JsonType::kString);
  CHECK(a->items[4].str == "s");
  CHECK(a->items[5].boolean);
  CHECK(a->items[6].type == JsonType::kBool);
  CHECK_FALSE(a->items[6].boolean);
  CHECK(a->items[7].type == JsonType::kNull);
  CHECK(a->items[8].type == JsonType::kObject);
  CHECK(a->items[8].members.empty());
  CHECK(v->find("b")->find("c")->str == "d");
  CHECK(v->find("zz") == nullptr);
}

TEST_CASE("parse_json refuses what is not one valid JSON text", "[json]") {
  CHECK(parse_json("").error().message == "not valid JSON: empty");
  CHECK(parse_json("{\"a\":\"\xff\"}").error().message == "not valid JSON: invalid UTF-8");
  CHECK(parse_json("{\"a\":\"abc}").error().message == "not valid JSON: unclosed string");
  for (const char* bad : {"{\"a\":}", "1 2", "{\"a\":1} x", "[1,]", "{\"a\" 1}", "{'a':1}"}) {
    auto v = parse_json(bad);
    INFO(bad);
    REQUIRE_FALSE(v.ok());
    CHECK(v.error().status == ExitStatus::kDataError);
    CHECK(v.error().message.starts_with("not valid JSON: "));
  }
}

// --- writers -----------------------------------------------------------------------

TEST_CASE("append_json_string escapes every control character", "[json][write]") {
  for (int c = 0; c < 0x20; ++c) {
    std::string in(1, static_cast<char>(c));
    std::string out;
    append_json_string(out, in);
    INFO("character " << c);
    CHECK(out == reference_escape(in));
    auto back = parse_json(out);
    REQUIRE(back.ok());
    CHECK(back->str == in);
  }
  std::string out = "keep:";
  append_json_string(out,
                     "a\"b\\c/d\x7f"
                     "é");
  CHECK(out ==
        "keep:\"a\\\"b\\\\c/d\x7f"
        "é\"");
}

TEST_CASE("append_json_string round-trips random text through a JSON parser", "[json][write]") {
  std::mt19937 rng(20261129);
  for (int i = 0; i < 2000; ++i) {
    std::string in = random_text(rng, 40);
    std::string out;
    append_json_string(out, in);
    INFO("case " << i);
    CHECK(out == reference_escape(in));
    auto back = parse_json(out);
    REQUIRE(back.ok());
    CHECK(back->str == in);
  }
}

TEST_CASE("append_int and append_uint at their limits", "[json][write]") {
  std::string out;
  append_int(out, std::numeric_limits<int64_t>::min());
  out.push_back(' ');
  append_int(out, 0);
  out.push_back(' ');
  append_uint(out, std::numeric_limits<uint64_t>::max());
  CHECK(out == "-9223372036854775808 0 18446744073709551615");
}

TEST_CASE("append_optional_int: the integer, or null", "[json][write]") {
  std::string out;
  append_optional_int(out, -42);
  out.push_back(' ');
  append_optional_int(out, std::nullopt);
  out.push_back(' ');
  append_optional_int(out, 0);
  CHECK(out == "-42 null 0");
}

TEST_CASE("append_double: shortest text, integers without a fraction", "[json][write]") {
  CHECK(dbl(3.0) == "3");
  CHECK(dbl(-0.0) == "0");
  CHECK(dbl(0.1) == "0.1");
  CHECK(dbl(-2.5) == "-2.5");
  CHECK(dbl(1e300) == "1e+300");
  CHECK(dbl(9007199254740991.0) == "9007199254740991");
  CHECK(dbl(1.5e-7) == "1.5e-07");
  CHECK(dbl(4611686018427387904.0) == "4611686018427387904");  // 2^62: int64 digits
}

TEST_CASE("append_double: integral values beyond 64 bits stay readable by simdjson",
          "[json][write]") {
  // Expected texts from Python's repr() where they have an exponent.
  CHECK(dbl(9223372036854775808.0) == "9223372036854775808");      // 2^63: a uint64
  CHECK(dbl(18446744073709549568.0) == "18446744073709549568");    // the last double below 2^64
  CHECK(dbl(18446744073709551616.0) == "1.8446744073709552e+19");  // 2^64
  CHECK(dbl(-9223372036854775808.0) == "-9223372036854775808");    // -2^63: an int64
  CHECK(dbl(-9223372036854777856.0) == "-9.223372036854778e+18");  // the next double down
  CHECK(dbl(-39403956888804933632.0) == "-3.940395688880493e+19");
  CHECK(dbl(1e20) == "1e+20");
  for (double v :
       {9223372036854775808.0, 18446744073709549568.0, 18446744073709551616.0,
        -9223372036854775808.0, -9223372036854777856.0, 1e20, -39403956888804933632.0, 1.7e308}) {
    std::string text = dbl(v);
    INFO(text);
    auto parsed = parse_json(text);
    REQUIRE(parsed.ok());
    CHECK(parsed->number == v);
  }
  CHECK(dbl(std::nan("")) == "null");
  CHECK(dbl(std::numeric_limits<double>::infinity()) == "null");
  CHECK(dbl(-std::numeric_limits<double>::infinity()) == "null");
}

TEST_CASE("append_double round-trips random doubles and stays JSON", "[json][write]") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-300, 300);
  for (int i = 0; i < 5000; ++i) {
    double v = std::ldexp(unit(rng), exponent(rng));
    if (i % 5 == 0) v = std::round(v * 1e6);  // integral values too
    std::string text = dbl(v);
    INFO(text);
    CHECK(std::strtod(text.c_str(), nullptr) == v);
    auto parsed = parse_json(text);
    REQUIRE(parsed.ok());
    CHECK(parsed->number == v);
  }
}

TEST_CASE("base64: RFC 4648 vectors", "[json][base64]") {
  CHECK(base64("") == "");
  CHECK(base64("f") == "Zg==");
  CHECK(base64("fo") == "Zm8=");
  CHECK(base64("foo") == "Zm9v");
  CHECK(base64("foob") == "Zm9vYg==");
  CHECK(base64("fooba") == "Zm9vYmE=");
  CHECK(base64("foobar") == "Zm9vYmFy");
  CHECK(base64(std::string("\xff\xfe\x00\x80", 4)) == "//4AgA==");
  CHECK(*decode_base64("Zm9vYmE=") == "fooba");
  CHECK(*decode_base64("Zm9vYg==") == "foob");
  CHECK(*decode_base64("//4AgA==") == std::string("\xff\xfe\x00\x80", 4));
  // The URL-safe alphabet and missing padding are read too.
  CHECK(*decode_base64("__4AgA") == std::string("\xff\xfe\x00\x80", 4));
  CHECK(*decode_base64("-_-_") == *decode_base64("+/+/"));
  CHECK(*decode_base64("") == "");
}

TEST_CASE("base64: random bytes round-trip", "[json][base64]") {
  std::mt19937 rng(42);
  for (size_t len = 0; len < 300; ++len) {
    std::string bytes;
    for (size_t i = 0; i < len; ++i) bytes.push_back(static_cast<char>(rng() & 0xff));
    std::string text = base64(bytes);
    INFO("length " << len);
    CHECK(text.size() == (len + 2) / 3 * 4);
    CHECK(text.find_first_not_of(
              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") ==
          std::string::npos);
    auto back = decode_base64(text);
    REQUIRE(back.ok());
    CHECK(*back == bytes);
  }
}

TEST_CASE("base64: invalid inputs", "[json][base64]") {
  for (const char* bad : {"Zm9!", "Zm 9", "Zm9\n", "Zm=v", "=Zm9", "Zm9vYmE\x80", "Zm9vYm.="}) {
    auto r = decode_base64(bad);
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().status == ExitStatus::kDataError);
    CHECK(r.error().message == "invalid base64: unexpected character");
  }
  for (const char* bad : {"Z", "Zm9vY", "Zm9vY==="}) {
    auto r = decode_base64(bad);
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "invalid base64: bad length");
  }
}

TEST_CASE("append_minified removes whitespace outside strings only", "[json][write]") {
  CHECK(minified(R"({ "a" : [ 1 , 2 ] , "b" :{} })") == R"({"a":[1,2],"b":{}})");
  CHECK(minified("{\n\t\"a\":\r\n 1\n}\n") == R"({"a":1})");
  CHECK(minified(R"({"s" : "a b\" c \\" , "t":"\\\"  x" })") ==
        R"({"s":"a b\" c \\","t":"\\\"  x"})");
  CHECK(minified(R"([ "\\", " " , "\" ]" ])") == R"(["\\"," ","\" ]"])");
  CHECK(minified(R"("  spaced  ")") == R"("  spaced  ")");
  CHECK(minified("  7  ") == "7");
  CHECK(minified(R"({"a":1})") == R"({"a":1})");
  CHECK(minified("") == "");
}

namespace {

// Random JSON built twice from the same tokens: once with random whitespace
// between them, once with none. Minifying the first must give the second.
void random_json(std::mt19937& rng, int depth, std::string& spaced, std::string& tight) {
  auto ws = [&] {
    static const char* kBlanks[] = {"", "", " ", "\n", "\t", "\r\n", "   "};
    spaced += kBlanks[rng() % 7];
  };
  auto token = [&](const std::string& t) {
    ws();
    spaced += t;
    tight += t;
    ws();
  };
  int kind = depth > 3 ? static_cast<int>(rng() % 3) : static_cast<int>(rng() % 5);
  switch (kind) {
    case 0:
      token(std::to_string(static_cast<int>(rng() % 2000) - 1000));
      break;
    case 1:
      token(reference_escape(random_text(rng, 12)));
      break;
    case 2:
      token(rng() % 2 ? "true" : "null");
      break;
    case 3: {
      token("[");
      int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) {
        if (i > 0) token(",");
        random_json(rng, depth + 1, spaced, tight);
      }
      token("]");
      break;
    }
    default: {
      token("{");
      int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) {
        if (i > 0) token(",");
        token(reference_escape(random_text(rng, 6)));
        token(":");
        random_json(rng, depth + 1, spaced, tight);
      }
      token("}");
      break;
    }
  }
}

}  // namespace

TEST_CASE("append_minified on random JSON", "[json][write]") {
  std::mt19937 rng(99);
  for (int i = 0; i < 1000; ++i) {
    std::string spaced, tight;
    random_json(rng, 0, spaced, tight);
    INFO(spaced);
    REQUIRE(parse_json(spaced).ok());
    CHECK(minified(spaced) == tight);
  }
}

TEST_CASE("PayloadEncoder: JSON is embedded minified", "[json][payload]") {
  PayloadEncoder enc;
  std::string out = "v=";
  CHECK(enc.append(out, "{\"a\": [1, 2],\n \"s\": \"x y\"}\n") == PayloadEncoder::Kind::kJson);
  CHECK(out == R"(v={"a":[1,2],"s":"x y"})");
  out.clear();
  CHECK(enc.append(out, "  42 ") == PayloadEncoder::Kind::kJson);
  CHECK(out == "42");
  out.clear();
  CHECK(enc.append(out, "\"hi\"") == PayloadEncoder::Kind::kJson);
  CHECK(out == "\"hi\"");
}

TEST_CASE("PayloadEncoder: what is not one JSON text becomes a string", "[json][payload]") {
  PayloadEncoder enc;
  for (const char* text :
       {"1 2", "{\"a\":1} x", "{\"a\":1}{}", "hello", "{\"a\":", "nul", "{'a':1}", "[1,]"}) {
    std::string out;
    INFO(text);
    CHECK_FALSE(enc.is_json(text));
    CHECK(enc.append(out, text) == PayloadEncoder::Kind::kString);
    CHECK(out == reference_escape(text));
  }
  std::string out;
  CHECK(enc.append(out, "") == PayloadEncoder::Kind::kString);
  CHECK(out == "\"\"");
  CHECK_FALSE(enc.is_json(""));
  out.clear();
  // A control character inside a JSON string makes it not JSON.
  CHECK(enc.append(out, "\"a\tb\"") == PayloadEncoder::Kind::kString);
  CHECK(out == "\"\\\"a\\tb\\\"\"");
}

TEST_CASE("PayloadEncoder: bytes that are not UTF-8 are binary and append nothing",
          "[json][payload]") {
  PayloadEncoder enc;
  std::string out = "keep";
  CHECK(enc.append(out, std::string("\xff\xfe\x00\x01", 4)) == PayloadEncoder::Kind::kBinary);
  CHECK(enc.append(out, "{\"a\":\"\xc3\"}") == PayloadEncoder::Kind::kBinary);
  CHECK(out == "keep");
}

TEST_CASE("PayloadEncoder: large payloads and reuse after them", "[json][payload]") {
  PayloadEncoder enc;
  std::string big = "[";
  for (int i = 0; i < 200000; ++i) big += (i ? ", " : "") + std::to_string(i);
  big += "]";
  std::string out;
  CHECK(enc.append(out, big) == PayloadEncoder::Kind::kJson);
  CHECK(out.size() == big.size() - 199999);
  CHECK(out.substr(0, 8) == "[0,1,2,3");
  // A shorter payload after a long one: what is left of the long one in
  // the scratch buffer must not count.
  out.clear();
  CHECK(enc.append(out, "[1") == PayloadEncoder::Kind::kString);
  out.clear();
  CHECK(enc.append(out, "{}") == PayloadEncoder::Kind::kJson);
  CHECK(out == "{}");
}

TEST_CASE("is_valid_utf8", "[json]") {
  CHECK(is_valid_utf8(""));
  CHECK(is_valid_utf8("plain é 😀"));
  CHECK_FALSE(is_valid_utf8("\xff"));
  CHECK_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong
  CHECK_FALSE(is_valid_utf8("\xed\xa0\x80"));      // a surrogate
  CHECK_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // beyond U+10FFFF
  CHECK_FALSE(is_valid_utf8("ab\xe2\x82"));        // truncated
}

// --- numbers of any size, and reasons in the user's terms -------------------------

namespace {

// The reason JsonValidator gives, or "" when it accepts.
std::string validator_verdict(std::string_view text) {
  JsonValidator v;
  Padded line(text);
  Status s = v.check(line.view());
  if (s.ok()) return "";
  CHECK(s.error().status == ExitStatus::kDataError);
  return s.error().message;
}

}  // namespace

TEST_CASE("numbers beyond 64 bits or a double are JSON to every reader", "[json][numbers]") {
  const std::string big = "123456789012345678901234567890";
  const std::string line = R"({"tx":)" + big + R"(,"e":1e309,"m":[-1E400],"ok":1})";
  // kdlq guard's validator and kproduce's check.
  CHECK(validator_verdict(line) == "");
  CHECK(validator_verdict("1e309") == "");
  PayloadEncoder enc;
  CHECK(enc.check(line).ok());
  // kconsume embeds the payload as JSON, not as a string of its text.
  std::string out;
  CHECK(enc.append(out, "{ \"tx\": " + big + " }") == PayloadEncoder::Kind::kJson);
  CHECK(out == R"({"tx":)" + big + "}");
  // The tree keeps each number's text.
  auto v = parse_json(line);
  REQUIRE(v.ok());
  const JsonValue* tx = v->find("tx");
  REQUIRE(tx != nullptr);
  CHECK(tx->type == JsonType::kNumber);
  CHECK_FALSE(tx->is_integer);
  CHECK(tx->str == big);
  CHECK(tx->number == 123456789012345678901234567890.0);
  CHECK(v->find("e")->str == "1e309");
  CHECK(v->find("e")->number == std::numeric_limits<double>::infinity());
  CHECK(v->find("m")->items[0].number == -std::numeric_limits<double>::infinity());
  CHECK(v->find("ok")->is_integer);
  CHECK(v->find("ok")->integer == 1);
  auto scalar = parse_json(" 1e309 ");
  REQUIRE(scalar.ok());
  CHECK(scalar->str == "1e309");
  // A valid big number does not excuse a fault after it.
  CHECK(validator_verdict(R"({"e":1e309,"x":01})") == "not valid JSON: malformed number");
  CHECK(validator_verdict(R"([1e309,"\ud800"])") == "not valid JSON: a lone surrogate \\ud800");
  CHECK(validator_verdict(R"([1e309] x)") == "not valid JSON: content after the value");
  CHECK(validator_verdict("[1e309,\"\xff\"]") == "not valid JSON: invalid UTF-8");
  CHECK(parse_json("[1e309,1e]").error().message == "not valid JSON: malformed number");
  CHECK_FALSE(enc.is_json("[1e309,]"));
}

TEST_CASE("a refused line is refused for the fault it has, named", "[json][reasons]") {
  // The same reason from the validator (kdlq guard), from the payload
  // check (kproduce), and, where the reader reads that far, from JsonReader.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\xEF\xBB\xBF{\"a\":1}", "the line begins with a UTF-8 byte order mark (BOM)"},
      {"{\"a\":1} trailing", "content after the value"},
      {"[1] 2", "content after the value"},
      {std::string("{\"a\":1}\0", 8), "a NUL byte after the value"},
      {std::string("{\"a\":1}\0{\"b\":2}", 15), "a NUL byte after the value"},
      {std::string("{\"a\":1,\0}", 9), "a NUL byte outside a string"},
      {"{\"a\":nul}", "'nul' is not a JSON value"},
      {"tru", "'tru' is not a JSON value"},
      {"{\"a\":yes}", "'yes' is not a JSON value"},
      {"{\"a\":NaN}", "NaN is not JSON"},
      {"[Infinity]", "Infinity is not JSON"},
      {"{\"a\":-Infinity}", "-Infinity is not JSON"},
      {"{\"a\":\"\\ud800\"}", "a lone surrogate \\ud800"},
      {"{\"a\":\"x\\uDC00\"}", "a lone surrogate \\uDC00"},
      {"{\"a\":\"\\ud800\\u0041\"}", "a lone surrogate \\ud800"},
      {"{\"a\":\"\\q\"}", "malformed string escape"},
      {std::string(100000, '[') + std::string(100000, ']'), "nesting deeper than 1024"},
      {"{\"a\":[1,2}", "malformed structure"},
      {"{\"a\":1", "truncated object or array"},
      {"{\"a\":01}", "malformed number"},
      {"", "empty"},
  };
  PayloadEncoder enc;
  Fixture fx;
  for (const auto& [line, why] : cases) {
    INFO(line.substr(0, 40));
    CHECK(validator_verdict(line) == "not valid JSON: " + why);
    Status checked = enc.check(line);
    REQUIRE_FALSE(checked.ok());
    CHECK(checked.error().message == "not valid JSON: " + why);
    CHECK(parse_json(line).error().message == "not valid JSON: " + why);
  }
  // The reader: what it reads, and the line's top level.
  CHECK(fx.error("\xEF\xBB\xBF{\"a\":1}", {".a"}) ==
        "not valid JSON: the line begins with a UTF-8 byte order mark (BOM)");
  CHECK(fx.error("{\"a\":NaN}", {".a"}) == "not valid JSON: NaN is not JSON");
  CHECK(fx.error("{\"a\":nul}", {".a"}) == "not valid JSON: 'nul' is not a JSON value");
  CHECK(fx.error("{\"a\":1} trailing", {}) == "not valid JSON: content after the value");
}

TEST_CASE("read_members: a line that is not an object, or not JSON", "[json][reader]") {
  JsonReader reader;
  std::vector<JsonMember> members;
  std::vector<std::unique_ptr<Padded>> lines;  // the members point into them
  auto why = [&](std::string_view text) {
    lines.push_back(std::make_unique<Padded>(text));
    Status s = reader.read_members(lines.back()->view(), members);
    return s.ok() ? std::string() : s.error().message;
  };
  CHECK(why(R"({"k":1,"v":123456789012345678901234567890,"w":1e400})").empty());
  REQUIRE(members.size() == 3);
  CHECK(members[1].value.raw == "123456789012345678901234567890");
  CHECK(members[2].value.number == std::numeric_limits<double>::infinity());
  // kupsert said "not null" and "not a bool" of these: they are neither.
  CHECK(why("nul") == "not valid JSON: 'nul' is not a JSON value");
  CHECK(why("tru") == "not valid JSON: 'tru' is not a JSON value");
  CHECK(why("null") == "expected a JSON object, not null");
  CHECK(why("[1]") == "expected a JSON object, not an array");
  CHECK(why(R"({"k":1,"v":tru})") == "not valid JSON: 'tru' is not a JSON value");
  CHECK(why(R"({"k":1} x)") == "not valid JSON: content after the value");
  // Found by tests/fuzz (upsert_row): a malformed object or array member
  // was skipped by bracket counting, and kupsert stored "[1,{"b":nul}]" as
  // a JSON column; a ':' after a member's value ended the walk early.
  // Members are taken whole, so the line is checked whole.
  CHECK(why(R"({"id":"x","nested":{"a":[1,{"b":nul}]}})") ==
        "not valid JSON: 'nul' is not a JSON value");
  CHECK(why(R"({"id":"x","list":[1,,2]})").rfind("not valid JSON: ", 0) == 0);
  CHECK(why(R"({"id":"Z","name":"":[1,2]}})").rfind("not valid JSON: ", 0) == 0);
  CHECK(why(R"({"id":"x","o":{"a":1,"big":1e400,"n":[123456789012345678901234567890]}})").empty());
}

// Random damage to random JSON: the validator accepts exactly what
// simdjson's DOM parser accepts, but for numbers it cannot hold.
TEST_CASE("the validator agrees with simdjson on damaged JSON", "[json][reasons]") {
  std::mt19937 rng(2026);
  static const char kDamage[] = "{}[],:\"\\ u0123456789eE.-+tfnlrsaNI\x01\t\x00\xff";
  JsonValidator validator;
  simdjson::dom::parser dom;
  for (int i = 0; i < 20000; ++i) {
    std::string text, tight;
    random_json(rng, 0, text, tight);
    for (int k = static_cast<int>(rng() % 3); k >= 0 && !text.empty(); --k) {
      size_t at = rng() % (text.size() + 1);
      char c = kDamage[rng() % (sizeof kDamage - 1)];
      switch (rng() % 3) {
        case 0:
          text.insert(at, 1, c);
          break;
        case 1:
          if (at < text.size()) text.erase(at, 1);
          break;
        default:
          if (at < text.size()) text[at] = c;
          break;
      }
    }
    simdjson::padded_string padded(text);
    simdjson::dom::element e;
    auto err = dom.parse(padded).get(e);
    Padded line(text);
    Status s = validator.check(line.view());
    INFO(text << " simdjson: " << simdjson::error_message(err));
    if (!err) {
      CHECK(s.ok());
    } else if (err != simdjson::NUMBER_ERROR) {
      REQUIRE_FALSE(s.ok());
      CHECK(s.error().message.starts_with("not valid JSON: "));
    }
  }
}

TEST_CASE("append_path_key: a key FieldPath::parse reads back", "[json]") {
  for (std::string key :
       {"user_id", "content-type", "a.b", "x[0]", "say \"hi\"", "back\\slash", "a/b", "", "ünï"}) {
    std::string text;
    append_path_key(text, key);
    INFO(text);
    auto path = FieldPath::parse(text);
    REQUIRE(path);
    REQUIRE(path->steps().size() == 1);
    CHECK(path->steps()[0].key == key);
  }
  std::string plain;
  append_path_key(plain, "user_id");
  CHECK(plain == ".user_id");
  std::string quoted;
  append_path_key(quoted, "a.b");
  CHECK(quoted == R"(."a.b")");
}

TEST_CASE("json_integer_digits: a number that is an integer from 0, beyond 64 bits too", "[json]") {
  std::string buffer;
  auto digits = [&](std::string_view raw) -> std::string {
    auto d = json_integer_digits(raw, buffer);
    return d ? std::string(*d) : std::string("none");
  };
  CHECK(digits("0") == "0");
  CHECK(digits("-0") == "0");
  CHECK(digits("0.000e5") == "0");
  CHECK(digits("42") == "42");
  CHECK(digits("340282366920938463463374607431768211455") ==
        "340282366920938463463374607431768211455");
  CHECK(digits("5.0") == "5");
  CHECK(digits("1e3") == "1000");
  CHECK(digits("1.25E+2") == "125");
  CHECK(digits("1500e-2") == "15");
  CHECK(digits("1.5") == "none");
  CHECK(digits("15e-2") == "none");
  CHECK(digits("-1") == "none");
  CHECK(digits("1e39") == "1000000000000000000000000000000000000000");
  CHECK(digits("1e40") == "none");
  CHECK(digits("1e999999999999999999999") == "none");
}
