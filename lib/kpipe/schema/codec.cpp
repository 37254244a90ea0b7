#include "kpipe/schema/codec.h"

#include "kpipe/choices.h"

namespace kpipe {

namespace {

constexpr size_t kFrameSize = 5;

}  // namespace

Expected<Framed> unframe(std::string_view bytes) {
  if (bytes.empty()) return data_error("empty: not in the Confluent wire format");
  if (bytes[0] != 0)
    return data_error("magic byte 0x{:02x} is not 0: not in the Confluent wire format",
                      static_cast<unsigned char>(bytes[0]));
  if (bytes.size() < kFrameSize)
    return data_error("{} bytes expected before the payload, found {}", kFrameSize, bytes.size());
  uint32_t id = 0;
  for (size_t i = 1; i < kFrameSize; ++i) id = id << 8 | static_cast<unsigned char>(bytes[i]);
  Framed f;
  f.schema_id = static_cast<int32_t>(id);
  f.payload = bytes.substr(kFrameSize);
  return f;
}

void append_frame(std::string& out, int32_t schema_id) {
  auto id = static_cast<uint32_t>(schema_id);
  out.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(id >> shift & 0xff));
}

Expected<PayloadFormat> parse_payload_format(std::string_view option, std::string_view text) {
  auto i =
      parse_choice(option, text, {"json", "string", "bytes", "avro", "protobuf", "json-schema"});
  if (!i) return i.take_error();
  static constexpr PayloadFormat kFormats[] = {
      PayloadFormat::kJson, PayloadFormat::kString,   PayloadFormat::kBytes,
      PayloadFormat::kAvro, PayloadFormat::kProtobuf, PayloadFormat::kJsonSchema};
  return kFormats[*i];
}

bool uses_registry(PayloadFormat format) {
  return format == PayloadFormat::kAvro || format == PayloadFormat::kProtobuf ||
         format == PayloadFormat::kJsonSchema;
}

SchemaType schema_type_of(PayloadFormat format) {
  switch (format) {
    case PayloadFormat::kProtobuf:
      return SchemaType::kProtobuf;
    case PayloadFormat::kJsonSchema:
      return SchemaType::kJson;
    default:
      return SchemaType::kAvro;
  }
}

}  // namespace kpipe
