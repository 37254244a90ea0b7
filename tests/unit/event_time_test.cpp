#include "kpipe/event_time.h"

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "helpers.h"

// One reader of event times for kwindow, kdedup and kguard; each keeps its
// own words for a field that holds no time.

namespace kpipe {
namespace {

// The field .ts of `line`, read as a program reads it.
class TimeOf {
 public:
  TimeOf() { fields_.add(FieldPath::parse(".ts").value()); }
  Expected<Millis> operator()(const std::string& line, TimeUnit unit = TimeUnit::kMillis,
                              const TimeFieldWording& wording = {}) {
    padded_ = std::make_unique<test::Padded>(line);
    REQUIRE(reader_.read(padded_->view(), fields_, values_).ok());
    return read_event_time(values_[0], ".ts", unit, wording);
  }

 private:
  FieldSet fields_;
  JsonReader reader_;
  std::vector<JsonField> values_;
  std::unique_ptr<test::Padded> padded_;
};

std::string message(const Expected<Millis>& t) {
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().status == ExitStatus::kDataError);
  return t.error().message;
}

TEST_CASE("event time: numbers in --time-unit, RFC 3339 strings", "[event_time]") {
  TimeOf time;
  CHECK(*time(R"({"ts":1795947330123})") == 1795947330123);
  CHECK(*time(R"({"ts":1795947330})", TimeUnit::kSeconds) == 1795947330000);
  CHECK(*time(R"({"ts":1795947330.5})", TimeUnit::kSeconds) == 1795947330500);
  CHECK(*time(R"({"ts":1795947330123456})", TimeUnit::kMicros) == 1795947330123);
  CHECK(*time(R"({"ts":-1})", TimeUnit::kMicros) == -1);
  // The unit is for numbers only.
  CHECK(*time(R"({"ts":"2026-11-29T10:15:30.123Z"})", TimeUnit::kSeconds) == 1795947330123);
  CHECK(*time(R"({"ts":"2026-11-29T11:15:30.123+01:00"})") == 1795947330123);
}

TEST_CASE("event time: a field that holds none, in the default words", "[event_time]") {
  TimeOf time;
  CHECK(message(time(R"({"t":1})")) == "field '.ts' is missing");
  CHECK(message(time(R"({"ts":true})")) == "field '.ts' is a bool, not a time");
  CHECK(message(time(R"({"ts":null})")) == "field '.ts' is null, not a time");
  CHECK(message(time(R"({"ts":{"s":1}})")) == "field '.ts' is an object, not a time");
  CHECK(message(time(R"({"ts":"yesterday"})")) ==
        "field '.ts': 'yesterday' is not an RFC 3339 time (expected a yyyy-mm-dd date)");
  CHECK(message(time(R"({"ts":1e300})")).starts_with("field '.ts': time '1e+300'"));
}

TEST_CASE("event time: a program's own words for a field that holds none", "[event_time]") {
  TimeOf time;
  TimeFieldWording kwindow{.expected = "a number or an RFC 3339 string"};
  CHECK(message(time(R"({"ts":[1]})", TimeUnit::kMillis, kwindow)) ==
        "field '.ts' is an array, not a number or an RFC 3339 string");
  CHECK(message(time(R"({"ts":"x"})", TimeUnit::kMillis, kwindow)).starts_with("field '.ts': 'x'"));
  TimeFieldWording guard{.expected = "a time", .says_not_a_time = true};
  CHECK(message(time(R"({"ts":"yesterday"})", TimeUnit::kMillis, guard)) ==
        "field '.ts' is not a time: 'yesterday' is not an RFC 3339 time (expected a yyyy-mm-dd "
        "date)");
  CHECK(message(time(R"({"ts":1e300})", TimeUnit::kMillis, guard))
            .starts_with("field '.ts' is not a time: time '1e+300'"));
  CHECK(message(time(R"({"ts":false})", TimeUnit::kMillis, guard)) ==
        "field '.ts' is a bool, not a time");
}

TEST_CASE("event time: times RFC 3339 cannot write are bad input that names the range",
          "[event_time]") {
  TimeOf time;
  // The edges themselves are times.
  CHECK(*time(R"({"ts":"0000-01-01T00:00:00Z"})") == kMinTime);
  CHECK(*time(R"({"ts":"9999-12-31T23:59:59.999Z"})") == kMaxTime);
  CHECK(*time(R"({"ts":-62167219200000})") == kMinTime);
  CHECK(*time(R"({"ts":253402300799999})") == kMaxTime);
  CHECK(*time(R"({"ts":253402300799.999})", TimeUnit::kSeconds) == kMaxTime);
  const std::string range =
      "outside RFC 3339's range, 0000-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z";
  // Numbers beyond them (they were written as "+10000-01-01..." and
  // "-283457-...", which nothing reads back).
  CHECK(message(time(R"({"ts":253402300800000})")) ==
        "field '.ts': time '253402300800000' (ms) is " + range);
  CHECK(message(time(R"({"ts":-62167219200001})")) ==
        "field '.ts': time '-62167219200001' (ms) is " + range);
  CHECK(message(time(R"({"ts":-9007199254740992})")) ==
        "field '.ts': time '-9007199254740992' (ms) is " + range);
  CHECK(message(time(R"({"ts":253402300800})", TimeUnit::kSeconds)) ==
        "field '.ts': time '253402300800' (s) is " + range);
  CHECK(message(time(R"({"ts":2.534023008e14})")) ==
        "field '.ts': time '2.534023008e14' (ms) is " + range);
  // Strings whose offset or leap second crosses an edge.
  CHECK(message(time(R"({"ts":"9999-12-31T23:59:60Z"})")) ==
        "field '.ts': time '9999-12-31T23:59:60Z' is " + range);
  CHECK(message(time(R"({"ts":"9999-12-31T23:30:00-01:00"})")) ==
        "field '.ts': time '9999-12-31T23:30:00-01:00' is " + range);
  CHECK(message(time(R"({"ts":"0000-01-01T00:00:00+00:01"})")) ==
        "field '.ts': time '0000-01-01T00:00:00+00:01' is " + range);
  // In a program's own words.
  TimeFieldWording guard{.expected = "a time", .says_not_a_time = true};
  CHECK(message(time(R"({"ts":253402300800000})", TimeUnit::kMillis, guard)) ==
        "field '.ts' is not a time: time '253402300800000' (ms) is " + range);
}

}  // namespace
}  // namespace kpipe
