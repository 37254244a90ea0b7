// Record payloads in the Confluent wire format (kpipe(7), SCHEMA
// REGISTRY): a zero magic byte, the schema's id as 4 bytes big-endian, and
// the payload encoded with that schema. A ValueCodec turns such bytes into
// one JSON value and back, with schemas from a SchemaRegistry. The
// interface only: codec_factory.h picks a concrete codec for a format.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kpipe/schema/registry.h"
#include "kpipe/status.h"

namespace kpipe {

struct Framed {
  int32_t schema_id = 0;
  std::string_view payload;  // after the id: for Protobuf, the message indexes first
};
// data_error when `bytes` are not in the wire format ("magic byte 0x7b is
// not 0: not in the Confluent wire format", "5 bytes expected, found 3").
Expected<Framed> unframe(std::string_view bytes);
// Appends the magic byte and the id.
void append_frame(std::string& out, int32_t schema_id);

// How decoded values are written.
struct DecodeOptions {
  // Avro's own JSON encoding (union branches wrapped as {"type": value},
  // bytes as \u00XX strings) instead of plain JSON values.
  bool avro_standard_json = false;
  // timestamp-millis/-micros as epoch milliseconds (kpipe(7), TIMES AND
  // DURATIONS: --time-format ms) instead of RFC 3339 strings.
  bool epoch_millis = false;
};

class ValueCodec {
 public:
  virtual ~ValueCodec() = default;
  // Appends the JSON value of one record's bytes to `out` and returns the
  // writer schema's id. A data_error says why the bytes cannot be decoded
  // (not framed, unknown id, truncated, not of the schema); `out` is then
  // as it was. A failure (the registry unreachable) is not the record's
  // fault and stops the program.
  virtual Expected<int32_t> decode(std::string_view bytes, std::string& out) = 0;
  // Appends the framed encoding of one JSON value (any JSON text, no
  // padding needed) with the schema `schema_id`. A data_error names the
  // field and why ("field 'total': expected a number, found a string").
  virtual Status encode(std::string_view json, int32_t schema_id, std::string& out) = 0;
};

enum class PayloadFormat { kJson, kString, kBytes, kAvro, kProtobuf, kJsonSchema };
// --key-format / --value-format.
Expected<PayloadFormat> parse_payload_format(std::string_view option, std::string_view text);
bool uses_registry(PayloadFormat format);
// The registry's schema type for avro, protobuf and json-schema.
SchemaType schema_type_of(PayloadFormat format);

}  // namespace kpipe
