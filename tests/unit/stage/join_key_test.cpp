#include "kpipe/stage/stateful.h"

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "helpers.h"

// The key kjoin joins a stream record on (kjoin(1), KEYS): for one path the
// bytes kproduce --key makes a Kafka key of, for several encode_key's JSON
// array.

namespace kpipe {
namespace {

// The join key of lines at the paths `paths`; "<null>" for no key.
class JoinKeyOf {
 public:
  explicit JoinKeyOf(std::vector<std::string> paths) {
    for (const std::string& p : paths) slots_.push_back(fields_.add(FieldPath::parse(p).value()));
  }
  Expected<std::string> operator()(const std::string& line) {
    padded_ = std::make_unique<test::Padded>(line);
    REQUIRE(reader_.read(padded_->view(), fields_, values_).ok());
    auto key = join_key(fields_, slots_, values_.data(), buffer_);
    if (!key) return key.take_error();
    if (!*key) return std::string("<null>");
    return std::string(**key);
  }

 private:
  FieldSet fields_;
  std::vector<size_t> slots_;
  JsonReader reader_;
  std::vector<JsonField> values_;
  std::string buffer_;
  std::unique_ptr<test::Padded> padded_;
};

TEST_CASE("join_key: one path is the Kafka key kproduce --key makes", "[join]") {
  JoinKeyOf key({".value.user"});
  // A string: its unescaped text, without quotes.
  CHECK(*key(R"({"value":{"user":"ann"}})") == "ann");
  CHECK(*key(R"({"value":{"user":"\u0061nn"}})") == "ann");
  CHECK(*key(R"({"value":{"user":"tab\there \"q\""}})") == "tab\there \"q\"");
  CHECK(*key(R"({"value":{"user":"é"}})") == "é");
  CHECK(*key(R"({"value":{"user":"\u00e9"}})") == "é");
  CHECK(key(R"({"value":{"user":""}})").value().empty());
  // A number or a boolean: its text as written.
  CHECK(*key(R"({"value":{"user":7}})") == "7");
  CHECK(*key(R"({"value":{"user":1.50}})") == "1.50");
  CHECK(*key(R"({"value":{"user":-3e2}})") == "-3e2");
  CHECK(*key(R"({"value":{"user":true}})") == "true");
  CHECK(*key(R"({"value":{"user":false}})") == "false");
  // 7 and "7" are the same key (a Kafka key `7` matches both).
  CHECK(*key(R"({"value":{"user":7}})") == *key(R"({"value":{"user":"7"}})"));
  // An object or array: minified JSON.
  CHECK(*key(R"({"value":{"user":{"id": 7, "r": [1, 2]}}})") == R"({"id":7,"r":[1,2]})");
  CHECK(*key(R"({"value":{"user":[ "a" , 1 ]}})") == R"(["a",1])");
  CHECK(*key(R"({"value":{"user":{}}})") == "{}");
}

TEST_CASE("join_key: null is no key", "[join]") {
  JoinKeyOf key({".user"});
  auto k = key(R"({"user":null})");
  REQUIRE(k.ok());
  CHECK(*k == "<null>");
}

TEST_CASE("join_key: a missing path is bad input that names it", "[join]") {
  JoinKeyOf key({".value.user"});
  auto k = key(R"({"value":{"name":"ann"}})");
  REQUIRE_FALSE(k.ok());
  CHECK(k.error().status == ExitStatus::kDataError);
  CHECK(k.error().message == "field '.value.user' is missing");
  auto parent = key(R"({"key":null})");
  REQUIRE_FALSE(parent.ok());
  CHECK(parent.error().message == "field '.value.user' is missing");

  JoinKeyOf two({".a", ".b"});
  auto second = two(R"({"a":1})");
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().status == ExitStatus::kDataError);
  CHECK(second.error().message == "field '.b' is missing");
}

TEST_CASE("join_key: several paths are a JSON array, like encode_key", "[join]") {
  JoinKeyOf key({".region", ".id"});
  CHECK(*key(R"({"region":"eu","id":7})") == R"(["eu",7])");
  // Strings stay JSON strings inside the array, one form for each.
  CHECK(*key(R"({"id":7,"region":"\u0065u"})") == R"(["eu",7])");
  CHECK(*key(R"({"region":"a,b","id":"c"})") == R"(["a,b","c"])");
  // 1 and 23 are not 12 and 3.
  CHECK(*key(R"({"region":1,"id":23})") == "[1,23]");
  CHECK(*key(R"({"region":12,"id":3})") == "[12,3]");
  CHECK(*key(R"({"region":{"x": [1, 2]},"id":true})") == R"([{"x":[1,2]},true])");
  // A null among several values is part of the key (encode_key's array),
  // not "no key".
  CHECK(*key(R"({"region":null,"id":1})") == "[null,1]");

  // The same array as encode_key makes.
  FieldSet fields;
  std::vector<size_t> slots{fields.add(FieldPath::parse(".region").value()),
                            fields.add(FieldPath::parse(".id").value())};
  JsonReader reader;
  std::vector<JsonField> values;
  for (std::string line : {R"({"region":"eu","id":7})", R"({"region":"\u0065\"","id":[1, 2]})",
                           R"({"region":{"b": 1},"id":-0.5})"}) {
    test::Padded padded(line);
    REQUIRE(reader.read(padded.view(), fields, values).ok());
    std::string a, b;
    auto joined = join_key(fields, slots, values.data(), a);
    auto encoded = encode_key(fields, slots, values.data(), b);
    REQUIRE(joined.ok());
    REQUIRE(encoded.ok());
    REQUIRE(*joined);
    CHECK(std::string(**joined) == std::string(*encoded));
  }
}

}  // namespace
}  // namespace kpipe
