#include "kpipe/kinesis/event_stream.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

// AWS's event-stream framing: the checksum, a message as kinesis-mock
// framed it, messages cut at every byte, and the framing broken (a CRC
// that does not match, a length out of bounds, a header of unknown type).

namespace kpipe {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

// An exception kinesis-mock 0.6.2 sent, as it sent it (the prelude, and
// the message's CRC32 at the end).
const std::string kMockPayload =
    R"({"message":"Another active subscription exists for consumer )"
    R"(arn:aws:kinesis:us-east-1:000000000000:stream/s1/consumer/c1:1796543549 on shard )"
    R"(shardId-000000000000"})";
const Headers kMockHeaders = {{":message-type", "exception"},
                              {":exception-type", "ResourceInUseException"},
                              {":content-type", "application/json"}};

Headers event_headers() {
  return {{":message-type", "event"},
          {":event-type", "SubscribeToShardEvent"},
          {":content-type", "application/json"}};
}

}  // namespace

TEST_CASE("event stream: CRC32 as zlib computes it", "[kinesis][event_stream]") {
  CHECK(crc32("") == 0);
  CHECK(crc32("123456789") == 0xCBF43926u);
  // In two parts, the first's CRC carried on.
  CHECK(crc32("56789", crc32("1234")) == 0xCBF43926u);
}

TEST_CASE("event stream: a message framed as kinesis-mock frames it", "[kinesis][event_stream]") {
  std::string m = encode_event_message(kMockHeaders, kMockPayload);
  REQUIRE(m.size() == 279);
  CHECK(m.substr(0, 12) == std::string("\x00\x00\x01\x17\x00\x00\x00\x64\x36\x61\xe2\x1f", 12));
  CHECK(m.substr(275) == std::string("\xb4\xd8\xc8\x97", 4));
  EventStreamDecoder d;
  REQUIRE(d.feed(m).ok());
  REQUIRE(d.messages().size() == 1);
  const EventMessage& e = d.messages()[0];
  CHECK(e.headers == kMockHeaders);
  CHECK(e.header(":exception-type") == "ResourceInUseException");
  CHECK(e.header(":event-type").empty());
  CHECK(e.payload == kMockPayload);
  CHECK(d.pending() == 0);
}

TEST_CASE("event stream: messages cut at every byte decode whole", "[kinesis][event_stream]") {
  std::string stream = encode_event_message(event_headers(), R"({"Records":[]})") +
                       encode_event_message(kMockHeaders, kMockPayload) +
                       encode_event_message({}, "");
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    EventStreamDecoder d;
    REQUIRE(d.feed(std::string_view(stream).substr(0, cut)).ok());
    REQUIRE(d.feed(std::string_view(stream).substr(cut)).ok());
    REQUIRE(d.messages().size() == 3);
    CHECK(d.messages()[0].payload == R"({"Records":[]})");
    CHECK(d.messages()[1].payload == kMockPayload);
    CHECK(d.messages()[2].headers.empty());
    CHECK(d.messages()[2].payload.empty());
  }
  // A byte at a time, taking the messages as they come.
  EventStreamDecoder d;
  size_t got = 0;
  for (char c : stream) {
    REQUIRE(d.feed(std::string_view(&c, 1)).ok());
    got += d.messages().size();
    d.messages().clear();
  }
  CHECK(got == 3);
  CHECK(d.pending() == 0);
}

TEST_CASE("event stream: headers of other types", "[kinesis][event_stream]") {
  // A bool, a byte of -2, a timestamp, bytes: built by hand.
  std::string h;
  auto name = [&h](const std::string& n, char type) {
    h.push_back(static_cast<char>(n.size()));
    h += n;
    h.push_back(type);
  };
  name("yes", 0);
  name("small", 2);
  h.push_back(static_cast<char>(0xfe));
  name("at", 8);
  h += std::string("\x00\x00\x01\x9a\x2b\x3c\x4d\x5e", 8);
  name("raw", 6);
  h += std::string("\x00\x02\xab\xcd", 4);
  std::string m;
  auto be32 = [&m](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) m.push_back(static_cast<char>((v >> s) & 0xff));
  };
  be32(static_cast<uint32_t>(12 + h.size() + 2 + 4));
  be32(static_cast<uint32_t>(h.size()));
  be32(crc32(m));
  m += h + "{}";
  be32(crc32(m));
  EventStreamDecoder d;
  REQUIRE(d.feed(m).ok());
  REQUIRE(d.messages().size() == 1);
  CHECK(d.messages()[0].header("yes") == "true");
  CHECK(d.messages()[0].header("small") == "-2");
  CHECK(d.messages()[0].header("at") == "1761661963614");
  CHECK(d.messages()[0].header("raw") == "abcd");
  CHECK(d.messages()[0].payload == "{}");
}

TEST_CASE("event stream: a broken framing is an error", "[kinesis][event_stream]") {
  std::string good = encode_event_message(event_headers(), R"({"Records":[]})");
  SECTION("the prelude's CRC") {
    std::string m = good;
    m[9] ^= 1;
    EventStreamDecoder d;
    Status s = d.feed(m);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message == "event stream: a message's prelude fails its CRC32");
  }
  SECTION("the message's CRC, a payload byte changed") {
    std::string m = good;
    m[m.size() - 6] ^= 0x20;
    EventStreamDecoder d;
    Status s = d.feed(m);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message ==
          fmt::format("event stream: a message of {} bytes fails its CRC32", m.size()));
  }
  SECTION("a length shorter than a message can be") {
    std::string m("\x00\x00\x00\x08\x00\x00\x00\x00", 8);
    m += std::string("\x00\x00\x00\x00", 4);
    uint32_t c = crc32(m.substr(0, 8));
    for (int s = 24, i = 8; s >= 0; s -= 8, ++i) m[i] = static_cast<char>((c >> s) & 0xff);
    EventStreamDecoder d;
    Status s = d.feed(m);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message == "event stream: a message of 8 bytes with 0 bytes of headers");
  }
  SECTION("a header of an unknown type") {
    std::string m = encode_event_message({{"x", "y"}}, "");
    m[14] = 42;  // the type byte of header "x"
    // Both CRCs made right again: the type alone is wrong.
    uint32_t c = crc32(m.substr(0, m.size() - 4));
    for (int s = 24, i = static_cast<int>(m.size()) - 4; s >= 0; s -= 8, ++i)
      m[i] = static_cast<char>((c >> s) & 0xff);
    EventStreamDecoder d;
    Status s = d.feed(m);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message == "event stream: header 'x' has unknown type 42");
  }
}

}  // namespace kpipe
