#include "kpipe/kinesis/event_stream.h"

#include <array>

#include <fmt/format.h>

namespace kpipe {

namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr auto kCrcTable = make_crc_table();

// The prelude (12 bytes) and the message's CRC (4).
constexpr size_t kPrelude = 12;
constexpr size_t kTrailer = 4;
// The service's own bounds: a message of at most 16 MiB, headers of at
// most 128 KiB. A length beyond them is a broken stream, not a big event.
constexpr uint32_t kMaxMessage = 16 * 1024 * 1024;
constexpr uint32_t kMaxHeaders = 128 * 1024;

uint32_t be32(const char* p) {
  auto b = [p](int i) { return static_cast<uint32_t>(static_cast<unsigned char>(p[i])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

void put_be32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::string hex(std::string_view bytes) {
  std::string out;
  for (char c : bytes) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return out;
}

}  // namespace

uint32_t crc32(std::string_view bytes, uint32_t crc) {
  crc = ~crc;
  for (char c : bytes) crc = kCrcTable[(crc ^ static_cast<unsigned char>(c)) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::string_view EventMessage::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

Status EventStreamDecoder::feed(std::string_view bytes) {
  // What was decoded is dropped before new bytes are kept: the buffer
  // holds at most one message and a read's worth.
  if (start_ > 0) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  buffer_.append(bytes);
  while (buffer_.size() - start_ >= kPrelude) {
    const char* p = buffer_.data() + start_;
    uint32_t total = be32(p);
    uint32_t headers = be32(p + 4);
    if (crc32(std::string_view(p, 8)) != be32(p + 8))
      return data_error("event stream: a message's prelude fails its CRC32");
    if (total < kPrelude + kTrailer || total > kMaxMessage || headers > kMaxHeaders ||
        headers > total - kPrelude - kTrailer)
      return data_error("event stream: a message of {} bytes with {} bytes of headers", total,
                        headers);
    if (buffer_.size() - start_ < total) break;
    KPIPE_TRY(decode(std::string_view(p, total)));
    start_ += total;
  }
  return {};
}

Status EventStreamDecoder::decode(std::string_view m) {
  if (crc32(m.substr(0, m.size() - kTrailer)) != be32(m.data() + m.size() - kTrailer))
    return data_error("event stream: a message of {} bytes fails its CRC32", m.size());
  uint32_t headers_length = be32(m.data() + 4);
  std::string_view h = m.substr(kPrelude, headers_length);
  EventMessage out;
  auto short_header = [] { return data_error("event stream: a header runs past the headers"); };
  while (!h.empty()) {
    size_t name_length = static_cast<unsigned char>(h[0]);
    if (h.size() < 1 + name_length + 1) return short_header();
    std::string name(h.substr(1, name_length));
    auto type = static_cast<unsigned char>(h[1 + name_length]);
    h.remove_prefix(2 + name_length);
    std::string value;
    // The value's length by type: 0 and 1 are true and false, 2 to 5
    // integers of 1, 2, 4 and 8 bytes, 6 and 7 bytes and a string (a u16
    // length first), 8 a timestamp (8 bytes), 9 a UUID (16).
    size_t fixed = 0;
    switch (type) {
      case 0:
        value = "true";
        break;
      case 1:
        value = "false";
        break;
      case 2:
        fixed = 1;
        break;
      case 3:
        fixed = 2;
        break;
      case 4:
        fixed = 4;
        break;
      case 5:
      case 8:
        fixed = 8;
        break;
      case 9:
        fixed = 16;
        break;
      case 6:
      case 7: {
        if (h.size() < 2) return short_header();
        size_t length = (static_cast<size_t>(static_cast<unsigned char>(h[0])) << 8) |
                        static_cast<unsigned char>(h[1]);
        if (h.size() < 2 + length) return short_header();
        value = type == 7 ? std::string(h.substr(2, length)) : hex(h.substr(2, length));
        h.remove_prefix(2 + length);
        break;
      }
      default:
        return data_error("event stream: header '{}' has unknown type {}", name, type);
    }
    if (fixed > 0) {
      if (h.size() < fixed) return short_header();
      if (fixed == 16) {
        value = hex(h.substr(0, fixed));
      } else {
        // Big-endian and signed, as the framing's integers and
        // timestamps (epoch milliseconds) are.
        uint64_t v = 0;
        for (size_t i = 0; i < fixed; ++i) v = (v << 8) | static_cast<unsigned char>(h[i]);
        int64_t s = fixed == 8 ? static_cast<int64_t>(v)
                               : static_cast<int64_t>(v << (64 - 8 * fixed)) >> (64 - 8 * fixed);
        value = std::to_string(s);
      }
      h.remove_prefix(fixed);
    }
    out.headers.emplace_back(std::move(name), std::move(value));
  }
  size_t body = kPrelude + headers_length;
  out.payload = std::string(m.substr(body, m.size() - kTrailer - body));
  messages_.push_back(std::move(out));
  return {};
}

std::string encode_event_message(const std::vector<std::pair<std::string, std::string>>& headers,
                                 std::string_view payload) {
  std::string h;
  for (const auto& [name, value] : headers) {
    h.push_back(static_cast<char>(name.size()));
    h += name;
    h.push_back(7);
    h.push_back(static_cast<char>((value.size() >> 8) & 0xff));
    h.push_back(static_cast<char>(value.size() & 0xff));
    h += value;
  }
  std::string out;
  put_be32(out, static_cast<uint32_t>(kPrelude + h.size() + payload.size() + kTrailer));
  put_be32(out, static_cast<uint32_t>(h.size()));
  put_be32(out, crc32(out));
  out += h;
  out += payload;
  put_be32(out, crc32(out));
  return out;
}

}  // namespace kpipe
