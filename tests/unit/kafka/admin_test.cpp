#include "kpipe/kafka/admin.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace kpipe;

namespace {

// Kafka's wire types, big-endian, for hand-built assignments.
void put16(std::string& out, int16_t v) {
  out.push_back(static_cast<char>((v >> 8) & 0xff));
  out.push_back(static_cast<char>(v & 0xff));
}

void put32(std::string& out, int32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

void put_string(std::string& out, const std::string& s) {
  put16(out, static_cast<int16_t>(s.size()));
  out += s;
}

// A ConsumerProtocolAssignment: version, [topic [partition]], user data.
std::string assignment(int16_t version,
                       const std::vector<std::pair<std::string, std::vector<int32_t>>>& topics,
                       const std::string& user_data = "") {
  std::string out;
  put16(out, version);
  put32(out, static_cast<int32_t>(topics.size()));
  for (const auto& [topic, parts] : topics) {
    put_string(out, topic);
    put32(out, static_cast<int32_t>(parts.size()));
    for (int32_t p : parts) put32(out, p);
  }
  put32(out, user_data.empty() ? -1 : static_cast<int32_t>(user_data.size()));
  out += user_data;
  return out;
}

}  // namespace

TEST_CASE("parse_consumer_assignment reads a member's partitions", "[kafka][admin]") {
  auto parts = parse_consumer_assignment(assignment(0, {{"events", {2, 0}}, {"audit", {1}}}));
  REQUIRE(parts);
  CHECK(*parts == std::vector<TopicPartition>{{"events", 2}, {"events", 0}, {"audit", 1}});
  // The sticky assignors' user data (version 1 and later) is skipped.
  auto sticky =
      parse_consumer_assignment(assignment(1, {{"events", {3}}}, std::string("\x00\x01gen", 5)));
  REQUIRE(sticky);
  CHECK(*sticky == std::vector<TopicPartition>{{"events", 3}});
  // A member assigned nothing (more members than partitions).
  auto none = parse_consumer_assignment(assignment(3, {}));
  REQUIRE(none);
  CHECK(none->empty());
}

TEST_CASE("parse_consumer_assignment refuses what is not an assignment", "[kafka][admin]") {
  std::string whole = assignment(0, {{"events", {0, 1}}});
  // Cut anywhere inside the partitions: never a shorter list.
  for (size_t n = 0; n < whole.size() - 4; ++n) {
    INFO(n);
    CHECK_FALSE(parse_consumer_assignment(whole.substr(0, n)));
  }
  // A topic name longer than the bytes left, and a negative version.
  std::string lying;
  put16(lying, 0);
  put32(lying, 1);
  put16(lying, 100);
  lying += "events";
  CHECK_FALSE(parse_consumer_assignment(lying));
  CHECK_FALSE(parse_consumer_assignment(assignment(-1, {{"events", {0}}})));
}
