// AWS's event-stream framing (application/vnd.amazon.eventstream), in
// which SubscribeToShard answers: a message is a prelude (its total length
// and its headers' length, big-endian u32s, and the prelude's CRC32), its
// headers (a name of up to 255 bytes, a type, a value), a payload and the
// whole message's CRC32. Bytes come as the connection gives them, cut
// anywhere: the decoder keeps the part of a message it has until the rest
// comes. Pure, so that its tests need no connection.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kpipe/status.h"

namespace kpipe {

// CRC-32 (ISO-HDLC, zlib's): the framing's checksum. A table of kpipe's
// own: the kinesis layer links libcurl and simdjson only.
uint32_t crc32(std::string_view bytes, uint32_t crc = 0);

struct EventMessage {
  // Every header's value as text: strings as they are; the other types
  // (bools, integers, bytes, timestamps, UUIDs) decoded and kept as
  // decimal or hex, though the Kinesis events carry strings alone.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string payload;
  // The header's value; "" when absent.
  std::string_view header(std::string_view name) const;
};

class EventStreamDecoder {
 public:
  // Takes the next bytes; a data error when they break the framing (a
  // checksum that does not match, a length out of bounds, a header of an
  // unknown type): the stream cannot be read on after that.
  Status feed(std::string_view bytes);
  // The messages complete so far, taken by the caller.
  std::vector<EventMessage>& messages() { return messages_; }
  // Bytes of a message not yet complete.
  size_t pending() const { return buffer_.size() - start_; }

 private:
  Status decode(std::string_view message);

  std::string buffer_;
  size_t start_ = 0;
  std::vector<EventMessage> messages_;
};

// One message as the service frames it, string headers only: for tests,
// and for whatever writes the framing back.
std::string encode_event_message(const std::vector<std::pair<std::string, std::string>>& headers,
                                 std::string_view payload);

}  // namespace kpipe
