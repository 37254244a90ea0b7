#include "kpipe/position.h"

#include <catch2/catch.hpp>

#include <string>

#include "kpipe/json.h"

// Positions (kpipe(7), LOGS): Kafka's offsets as numbers, Kinesis's
// sequence numbers as strings of digits no integer holds, and the time a
// shard was started at; each written so that it reads back as itself.

namespace kpipe {
namespace {

// A real sequence number's 56 digits: beyond int64_t and a double.
const std::string kSequence = "49590338271490256608559692538361571095921575989136588898";

Position seq(const std::string& digits) {
  auto p = Position::sequence(digits);
  REQUIRE(p);
  return *p;
}

std::string json(const Position& p) {
  std::string out;
  p.append_json(out);
  return out;
}

std::optional<Position> read_json(const std::string& text) {
  auto parsed = parse_json(text);
  REQUIRE(parsed.ok());
  return Position::from_json(*parsed);
}

}  // namespace

TEST_CASE("Position: each kind is written as it reads back", "[position]") {
  CHECK(json(17) == "17");
  CHECK(json(-2) == "-2");
  CHECK(json(seq(kSequence)) == "\"" + kSequence + "\"");
  CHECK(json(Position::arrived_at(1764412345123)) == "\"@1764412345123\"");
  for (const Position& p : {Position(0), Position(17), Position(-1), seq(kSequence), seq("0"),
                            Position::arrived_at(1764412345123), Position::arrived_at(0)}) {
    INFO(p.text());
    CHECK(read_json(json(p)) == p);
    // Text without a kind: a short number is taken for an offset (real
    // sequence numbers have 56 digits).
    if (p != seq("0")) CHECK(Position::from_text(p.text()) == p);
  }
  CHECK(Position::from_text("0") == Position(0));
  CHECK(seq(kSequence).text() == kSequence);
  CHECK(fmt::format("{}", seq(kSequence)) == kSequence);
  CHECK(fmt::format("{}", Position(17)) == "17");
}

TEST_CASE("Position: what is not a position is refused", "[position]") {
  for (const char* digits : {"", "007", "-1", "1.5", "12a", "+3", " 1"}) {
    INFO(digits);
    CHECK_FALSE(Position::sequence(digits));
  }
  CHECK_FALSE(Position::sequence(std::string(130, '9')));
  CHECK(Position::sequence(std::string(129, '9')));
  for (const char* text : {"1.5", "true", "null", "\"x\"", "\"@\"", "\"@-5\"", "\"@1x\"", "[1]",
                           "18446744073709551616"}) {
    INFO(text);
    CHECK_FALSE(read_json(text));
  }
}

TEST_CASE("Position: ordered by value within a kind, marks around the rest", "[position]") {
  CHECK(Position(9) < Position(10));
  // By value, not as text: "9..." would sort after "10..." as text.
  CHECK(seq("9" + std::string(55, '0')) < seq("1" + std::string(56, '0')));
  CHECK(seq(kSequence) < seq("49590338271490256608559692538361571095921575989136588899"));
  CHECK(seq(kSequence) == seq(kSequence));
  // Sequence numbers a shard gave, one after the other (the Kinesis
  // layer's compare_sequence, which Position replaced).
  const Position a = seq("49656789012345678901234567890123456789012345678901234562");
  const Position b = seq("49656789012345678901234567890123456789012345678901234563");
  CHECK(a < b);
  CHECK(b > a);
  CHECK((a <=> a) == std::strong_ordering::equal);
  CHECK(seq("9") < seq("10"));
  // Digits with leading zeros are no sequence number the service gives.
  CHECK_FALSE(Position::sequence("0010"));
  CHECK_FALSE(Position::sequence("000"));
  CHECK(Position::arrived_at(5) < Position::arrived_at(6));
  // None yet (a negative offset) before everything, no end after everything.
  CHECK(Position(-1) < seq("0"));
  CHECK(Position(-1) < Position::arrived_at(0));
  CHECK(seq(kSequence) < Position(Position::kMax));
  CHECK(Position::arrived_at(1764412345123) < Position(Position::kMax));
  // A shard started at a time is before every record read from it.
  CHECK(Position::arrived_at(1764412345123) < seq("0"));
  CHECK(std::max(seq(kSequence), Position(0)) == seq(kSequence));
}

}  // namespace kpipe
