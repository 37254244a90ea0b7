// The envelope (kpipe(7), THE ENVELOPE): one Kafka record as one NDJSON line, written by
// kconsume and read back by kproduce --envelope.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/json.h"
#include "kpipe/position.h"
#include "kpipe/status.h"

namespace kpipe {

struct Header {
  std::string_view name;
  std::optional<std::string_view> value;  // nullopt: a null header value
};

// A Kafka record as views into someone else's memory (librdkafka's message
// or the reader's line).
struct RecordView {
  std::string_view topic;
  int32_t partition = -1;
  Position offset = -1;
  int64_t timestamp = -1;  // epoch ms; -1 when the record has none
  std::optional<std::string_view> key;
  std::optional<std::string_view> value;  // nullopt: a tombstone
  std::vector<Header> headers;
  // How the envelope shows the key and the value (kconsume --key-format,
  // --value-format): kAuto as kpipe(7), THE ENVELOPE, says; kString as a
  // JSON string even when the bytes are JSON; kBytes as base64; kJson:
  // the bytes are a JSON value decoded from a schema's encoding, written
  // as they are, with the schema's id.
  enum class As : uint8_t { kAuto, kString, kBytes, kJson };
  As key_as = As::kAuto;
  As value_as = As::kAuto;
  int32_t key_schema_id = 0;  // with kJson
  int32_t value_schema_id = 0;
};

enum class ConsumeFormat { kEnvelope, kValue };

// Appends `"NAME":` and `bytes` as envelopes hold them: with an encoder, a
// JSON payload embedded as JSON; text as a JSON string; anything else as
// `"NAME_base64":"..."` instead.
void append_bytes_field(std::string& out, std::string_view name, std::string_view bytes,
                        PayloadEncoder* encoder = nullptr);

// Appends envelopes without re-serialising payloads that are JSON already.
class EnvelopeWriter {
 public:
  // One envelope line, '\n' included.
  void append(std::string& out, const RecordView& r);
  // The value alone, embedded as in the envelope ("null" for a tombstone,
  // {"value_base64":"..."} for bytes that are not UTF-8), '\n' included.
  void append_value(std::string& out, const RecordView& r);

 private:
  PayloadEncoder encoder_;
  std::string topic_cache_ = "\"\"";  // the last topic, already quoted
  std::string topic_cache_key_;
};

// A record read from an envelope line; owns what it holds.
struct EnvelopeRecord {
  std::optional<std::string> topic;
  std::optional<int32_t> partition;
  std::optional<Position> offset;
  std::optional<int64_t> timestamp;
  std::optional<std::string> key;
  std::optional<std::string> value;  // nullopt: a tombstone
  struct OwnedHeader {
    std::string name;
    std::optional<std::string> value;
  };
  std::vector<OwnedHeader> headers;
  // What kconsume decoded with a schema (kpipe(7), SCHEMA REGISTRY): the
  // id it was written with, and, when the reader keeps them, the JSON text
  // of the key and the value as the line holds them, for an encoder.
  std::optional<int32_t> key_schema_id;
  std::optional<int32_t> value_schema_id;
  std::optional<std::string> key_json;
  std::optional<std::string> value_json;
  // The value came as value_base64: bytes to send as they are.
  bool value_is_bytes = false;
  bool key_is_bytes = false;
};

// The Kafka record key that kproduce --key makes of a field's value
// (kproduce(1)): a string's unescaped text, an object or array minified,
// any other value its text as written; nullopt for null (no key). The view
// points into the field or `buffer`. `f` must not be missing.
std::optional<std::string_view> record_key_bytes(const JsonField& f, std::string& buffer);

// Reads envelope lines with one reused parser.
class EnvelopeReader {
 public:
  // `keep_json`: also fill key_json and value_json.
  explicit EnvelopeReader(bool keep_json = false);
  // `line` must be padded (a Line from LineFeed). Errors are data_errors
  // naming the field: "field 'value' is missing".
  Status read(std::string_view line, EnvelopeRecord& out);

 private:
  JsonReader reader_;
  FieldSet fields_;
  std::vector<JsonField> values_;
  std::string scratch_;
  bool keep_json_;
};

// Whether an envelope's timestamp can be produced exactly as it is
// (kproduce(1)): absent, or from 1 on. librdkafka takes 0 for "now", and
// Kafka's clients (and kconsume, which writes null for them) know no
// timestamp before the epoch: a data_error naming the field says so.
Status check_producible_timestamp(std::optional<int64_t> timestamp);

// Where a line came from, when it is an envelope: for dead letters.
struct SourcePosition {
  std::string topic;
  int32_t partition = -1;
  Position offset = -1;
};
// Best effort: nullopt unless the line is a JSON object with a string
// "topic", an integer "partition" and an "offset" (position.h).
std::optional<SourcePosition> source_position(std::string_view padded_line);

}  // namespace kpipe
