#include "kpipe/guard.h"

#include <catch2/catch.hpp>

#include <string>

#include "guard_fixtures.h"
#include "kpipe/line.h"

namespace kpipe {
namespace {

using namespace std::string_literals;

using test::requirements;

// "" when the line passes, else the reason.
std::string verdict(Guard& guard, std::string_view line) {
  std::string padded(line);
  padded.append(kJsonPadding, '\0');
  Status s = guard.check(std::string_view(padded.data(), line.size()));
  if (s.ok()) return "";
  CHECK(s.error().status == ExitStatus::kDataError);
  return s.error().message;
}

TEST_CASE("a requirement takes a path and an optional type after the last colon", "[guard]") {
  auto r = parse_requirement(".value.ts:time");
  REQUIRE(r.ok());
  CHECK(r->path.text() == ".value.ts");
  CHECK(r->type == FieldType::kTime);

  r = parse_requirement(".user_id");
  REQUIRE(r.ok());
  CHECK(r->type == FieldType::kAny);

  r = parse_requirement("/value/a:b:integer");  // a JSON Pointer with a colon in a key
  REQUIRE(r.ok());
  CHECK(r->path.text() == "/value/a:b");
  CHECK(r->type == FieldType::kInteger);

  r = parse_requirement(".\"a:b\"");  // quoted: the colon belongs to the key
  REQUIRE(r.ok());
  CHECK(r->type == FieldType::kAny);
  CHECK(r->path.steps()[0].key == "a:b");

  for (const char* t : {"string", "number", "integer", "bool", "object", "array", "time"}) {
    auto typed = parse_requirement(std::string(".x:") + t);
    REQUIRE(typed.ok());
    CHECK(field_type_name(typed->type) == std::string(t));
  }

  auto typo = parse_requirement(".ts:strng");
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.error().status == ExitStatus::kUsage);
  CHECK(typo.error().message ==
        "--require '.ts:strng': unknown type 'strng', did you mean 'string'?");

  auto root = parse_requirement(".");
  REQUIRE_FALSE(root.ok());
  CHECK(root.error().message == "--require '.': the path names no field");

  auto bad = parse_requirement(".a..b");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "--require '.a..b': invalid field path '.a..b': empty segment");
}

TEST_CASE("a field must be there, not null, and of its type", "[guard]") {
  Guard g(requirements({".user_id:string", ".ts:time", ".amount:integer", ".tags:array",
                        ".meta:object", ".ok:bool", ".score:number", ".note"}));
  const std::string good =
      R"({"user_id":"u1","ts":1795946400010,"amount":3,"tags":[],"meta":{},"ok":true,"score":1.5,"note":0})";
  CHECK(verdict(g, good) == "");
  CHECK(
      verdict(
          g,
          R"({"user_id":"u1","ts":"2026-11-29T10:15:30+02:00","amount":3.0,"tags":[1],"meta":{"a":1},)"
          R"("ok":false,"score":-2,"note":"x"})") == "");

  auto with = [&](std::string field, std::string value) {
    std::string line = good;
    size_t at = line.find("\"" + field + "\":");
    REQUIRE(at != std::string::npos);
    size_t start = at + field.size() + 3;
    size_t end = line.find_first_of(",}", start);
    if (line[start] == '[' || line[start] == '{') end = line.find_first_of("]}", start) + 1;
    return line.substr(0, start) + value + line.substr(end);
  };
  CHECK(verdict(g, with("user_id", "42")) == "field '.user_id' is a number, not a string");
  CHECK(verdict(g, with("user_id", "null")) == "field '.user_id' is null, not a string");
  CHECK(verdict(g, with("amount", "1.5")) == "field '.amount' is 1.5, not an integer");
  CHECK(verdict(g, with("amount", "\"12\"")) == "field '.amount' is a string, not an integer");
  CHECK(verdict(g, with("amount", "18446744073709551615")) == "");  // an integer beyond int64
  CHECK(verdict(g, with("tags", "{}")) == "field '.tags' is an object, not an array");
  CHECK(verdict(g, with("meta", "[]")) == "field '.meta' is an array, not an object");
  CHECK(verdict(g, with("ok", "1")) == "field '.ok' is a number, not a bool");
  CHECK(verdict(g, with("score", "\"1\"")) == "field '.score' is a string, not a number");
  CHECK(verdict(g, with("note", "null")) == "field '.note' is null");
  CHECK(verdict(g, with("ts", "true")) == "field '.ts' is a bool, not a time");
  CHECK(verdict(g, with("ts", "\"yesterday\"")).starts_with("field '.ts' is not a time: "));
  CHECK(verdict(g, with("ts", "1e300")).starts_with("field '.ts' is not a time: "));
  CHECK(verdict(g, with("ts", "1795946400010.5")) == "");

  // The first requirement broken, in the order given.
  CHECK(verdict(g, R"({"ts":"x"})") == "field '.user_id' is missing");
}

TEST_CASE("a missing field is explained by the scalar in its way", "[guard]") {
  Guard g(requirements({".value.user.id", ".value.items[0]"}));
  CHECK(verdict(g, R"({"value":{"user":{"id":1},"items":[0]}})") == "");
  CHECK(verdict(g, R"({"value":{"user":{},"items":[0]}})") == "field '.value.user.id' is missing");
  CHECK(verdict(g, R"({"value":{"user":"u1","items":[0]}})") ==
        "field '.value.user' is a string, not an object");
  CHECK(verdict(g, R"({"value":7})") == "field '.value' is a number, not an object");
  CHECK(verdict(g, R"({"other":1})") == "field '.value.user.id' is missing");
  CHECK(verdict(g, R"({"value":{"user":{"id":1},"items":{"0":1}}})") ==
        "field '.value.items' is an object, not an array");
  CHECK(verdict(g, "42") == "the line is a number, not an object");
  CHECK(verdict(g, R"("text")") == "the line is a string, not an object");
  CHECK(verdict(g, "[1,2]") == "the line is an array, not an object");
}

TEST_CASE("the guard checks the whole line, not just the fields it reads", "[guard]") {
  Guard g(requirements({".id"}));
  std::string deep = "{\"id\":1,\"deep\":" + std::string(2000, '[') + std::string(2000, ']') + "}";
  CHECK(verdict(g, deep) == "not valid JSON: nesting deeper than 1024");
  CHECK(verdict(g, "{\"id\":1,\"note\":\"a\tb\"}") ==
        "not valid JSON: unescaped control character in a string");
  CHECK(verdict(g, "{\"id\":1,\"x\":\"\xff\"}") == "not valid JSON: invalid UTF-8");
  CHECK(verdict(g, "{\"id\":1,\"n\":NaN}") == "not valid JSON: NaN is not JSON");
  CHECK(verdict(g, "{\"id\":1,\"n\":[1,2}") != "");
  CHECK(verdict(g, "{\"id\":1} {\"id\":2}") == "not valid JSON: content after the value");
  CHECK(verdict(g, "{\"id\":\"u2\",\"ts\":17959") == "not valid JSON: truncated object or array");
  CHECK(verdict(g, "\x00\x01\x02{\"id\":1}"s).starts_with("not valid JSON: "));
  CHECK(verdict(g, "   ") == "not valid JSON: empty");
}

TEST_CASE("the guard passes numbers of any size and says which are integers", "[guard]") {
  // Valid JSON that simdjson cannot hold as a number: it was "malformed".
  Guard any(requirements({".tx"}));
  CHECK(verdict(any, R"({"tx":123456789012345678901234567890})") == "");
  CHECK(verdict(any, R"({"tx":1e309,"y":-1e400})") == "");
  CHECK(verdict(any, R"({"tx":1,"y":[1e309]})") == "");
  CHECK(verdict(any, R"({"tx":1,"y":1e})") == "not valid JSON: malformed number");

  Guard g(requirements({".n:integer"}));
  auto n = [&](std::string number) { return verdict(g, "{\"n\":" + number + "}"); };
  for (const char* integral :
       {"3", "3.0", "1e3", "10e-1", "-0", "0.0e-5", "123456789012345678901234567890",
        "123456789012345678901234567890.000", "1e309", "1E+400", "1e99999999999999999999"})
    CHECK(n(integral) == "");
  CHECK(n("1.5") == "field '.n' is 1.5, not an integer");
  CHECK(n("1e-1") == "field '.n' is 1e-1, not an integer");
  CHECK(n("15e-1") == "field '.n' is 15e-1, not an integer");
  // An integer once read as a double (2^64 + 0.5 rounds to 2^64): the text decides.
  CHECK(n("18446744073709551616.5") == "field '.n' is 18446744073709551616.5, not an integer");
  CHECK(n("1e-99999999999999999999") == "field '.n' is 1e-99999999999999999999, not an integer");

  Guard number(requirements({".n:number"}));
  CHECK(verdict(number, R"({"n":-1e400})") == "");
}

TEST_CASE("the guard names what is wrong with a line that is not JSON", "[guard]") {
  Guard g(requirements({".id"}));
  CHECK(verdict(g, "\xEF\xBB\xBF{\"id\":1}") ==
        "not valid JSON: the line begins with a UTF-8 byte order mark (BOM)");
  CHECK(verdict(g, "{\"id\":1} trailing") == "not valid JSON: content after the value");
  CHECK(verdict(g, "{\"id\":1}\0"s) == "not valid JSON: a NUL byte after the value");
  CHECK(verdict(g, "{\"id\":1}\0{}"s) == "not valid JSON: a NUL byte after the value");
  CHECK(verdict(g, "{\"id\":nul}") == "not valid JSON: 'nul' is not a JSON value");
  CHECK(verdict(g, "{\"id\":1,\"x\":Infinity}") == "not valid JSON: Infinity is not JSON");
  CHECK(verdict(g, "{\"id\":\"\\ud800\"}") == "not valid JSON: a lone surrogate \\ud800");
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK(verdict(g, deep) == "not valid JSON: nesting deeper than 1024");
}

}  // namespace
}  // namespace kpipe
