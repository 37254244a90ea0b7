#include "kpipe/envelope.h"

#include <cstdint>
#include <tuple>

namespace kpipe {

namespace {

// Slots of EnvelopeReader's field set, in the order added.
enum Slot : size_t {
  kTopic,
  kPartition,
  kOffset,
  kTimestamp,
  kKey,
  kKeyB64,
  kValue,
  kValueB64,
  kHeaders,
  kKeySchemaId,
  kValueSchemaId
};

}  // namespace

void append_bytes_field(std::string& out, std::string_view name, std::string_view bytes,
                        PayloadEncoder* encoder) {
  out.push_back('"');
  out.append(name);
  if (encoder != nullptr) {
    out.append("\":");
    size_t mark = out.size();
    PayloadEncoder::Kind kind = encoder->append(out, bytes);
    if (kind == PayloadEncoder::Kind::kString) return;
    if (kind == PayloadEncoder::Kind::kJson) {
      // Embedded, a JSON string would read back as its content (the
      // payload "a" as a) and null as a tombstone: those two are written
      // as the string of their bytes instead, like any other text.
      if (out[mark] != '"' && out[mark] != 'n') return;
      out.resize(mark);
      append_json_string(out, bytes);
      return;
    }
    out.resize(mark - 2);
  } else if (is_valid_utf8(bytes)) {
    out.append("\":");
    append_json_string(out, bytes);
    return;
  }
  out.append("_base64\":\"");
  append_base64(out, bytes);
  out.push_back('"');
}

namespace {

// A key or a value that --key-format or --value-format says how to show.
void append_payload(std::string& out, std::string_view name, std::string_view bytes,
                    RecordView::As as, int32_t schema_id) {
  out.push_back('"');
  out.append(name);
  switch (as) {
    case RecordView::As::kJson:
      out.append("\":");
      out.append(bytes);
      out.append(",\"");
      out.append(name);
      out.append("_schema_id\":");
      append_int(out, schema_id);
      return;
    case RecordView::As::kString:
      if (is_valid_utf8(bytes)) {
        out.append("\":");
        append_json_string(out, bytes);
        return;
      }
      break;
    default:
      break;
  }
  out.append("_base64\":\"");
  append_base64(out, bytes);
  out.push_back('"');
}

}  // namespace

void EnvelopeWriter::append(std::string& out, const RecordView& r) {
  if (r.topic != topic_cache_key_) {
    topic_cache_key_ = std::string(r.topic);
    topic_cache_.clear();
    append_json_string(topic_cache_, r.topic);
  }
  out.append("{\"topic\":");
  out.append(topic_cache_);
  out.append(",\"partition\":");
  append_int(out, r.partition);
  out.append(",\"offset\":");
  r.offset.append_json(out);
  out.append(",\"timestamp\":");
  if (r.timestamp >= 0) {
    append_int(out, r.timestamp);
  } else {
    out.append("null");
  }
  out.push_back(',');
  if (!r.key) {
    out.append("\"key\":null");
  } else if (r.key_as == RecordView::As::kAuto || r.key_as == RecordView::As::kString) {
    append_bytes_field(out, "key", *r.key, nullptr);
  } else {
    append_payload(out, "key", *r.key, r.key_as, r.key_schema_id);
  }
  if (!r.headers.empty()) {
    out.append(",\"headers\":[");
    bool first = true;
    for (const Header& h : r.headers) {
      if (!first) out.push_back(',');
      first = false;
      out.push_back('[');
      // Header names are strings in the protocol; a name that is not UTF-8
      // could not round-trip, so its bytes are shown as base64 text.
      if (is_valid_utf8(h.name)) {
        append_json_string(out, h.name);
      } else {
        out.push_back('"');
        append_base64(out, h.name);
        out.push_back('"');
      }
      out.push_back(',');
      if (!h.value) {
        out.append("null");
      } else if (is_valid_utf8(*h.value)) {
        append_json_string(out, *h.value);
      } else {
        out.append("{\"base64\":\"");
        append_base64(out, *h.value);
        out.append("\"}");
      }
      out.push_back(']');
    }
    out.push_back(']');
  }
  out.push_back(',');
  if (!r.value) {
    out.append("\"value\":null");
  } else if (r.value_as == RecordView::As::kAuto) {
    append_bytes_field(out, "value", *r.value, &encoder_);
  } else {
    append_payload(out, "value", *r.value, r.value_as, r.value_schema_id);
  }
  out.append("}\n");
}

void EnvelopeWriter::append_value(std::string& out, const RecordView& r) {
  if (!r.value) {
    out.append("null\n");
    return;
  }
  if (r.value_as == RecordView::As::kJson) {
    out.append(*r.value);
  } else if (r.value_as == RecordView::As::kString && is_valid_utf8(*r.value)) {
    append_json_string(out, *r.value);
  } else if (r.value_as == RecordView::As::kBytes ||
             encoder_.append(out, *r.value) == PayloadEncoder::Kind::kBinary) {
    out.append("{\"value_base64\":\"");
    append_base64(out, *r.value);
    out.append("\"}");
  }
  out.push_back('\n');
}

EnvelopeReader::EnvelopeReader(bool keep_json) : keep_json_(keep_json) {
  for (const char* p :
       {".topic", ".partition", ".offset", ".timestamp", ".key", ".key_base64", ".value",
        ".value_base64", ".headers", ".key_schema_id", ".value_schema_id"}) {
    fields_.add(FieldPath::parse(p).value());
  }
}

namespace {

Expected<std::optional<int64_t>> integer_field(const JsonField& f, std::string_view name) {
  if (f.type == JsonType::kMissing || f.type == JsonType::kNull) return std::optional<int64_t>{};
  if (f.type != JsonType::kNumber || !f.is_integer)
    return data_error("field '{}' is not an integer", name);
  return std::optional<int64_t>{f.integer};
}

}  // namespace

Status EnvelopeReader::read(std::string_view line, EnvelopeRecord& out) {
  out = EnvelopeRecord{};
  KPIPE_TRY(reader_.read(line, fields_, values_));
  if (reader_.root_type() != JsonType::kObject)
    return data_error("expected an envelope object, found {}",
                      json_type_phrase(reader_.root_type()));

  const JsonField& topic = values_[kTopic];
  if (topic.type == JsonType::kString) out.topic = std::string(topic.str);

  auto partition = integer_field(values_[kPartition], "partition");
  if (!partition) return partition.take_error();
  if (*partition) {
    if (**partition < INT32_MIN || **partition > INT32_MAX)
      return data_error("field 'partition' is out of range");
    out.partition = static_cast<int32_t>(**partition);
  }
  // An offset, or a Kinesis sequence number as a string (kpipe(7), LOGS).
  const JsonField& offset = values_[kOffset];
  if (offset.type != JsonType::kMissing && offset.type != JsonType::kNull) {
    out.offset = Position::from_json(offset);
    if (!out.offset)
      return data_error(
          "field 'offset' is not an integer or a string of a sequence number's digits");
  }
  auto timestamp = integer_field(values_[kTimestamp], "timestamp");
  if (!timestamp) return timestamp.take_error();
  out.timestamp = *timestamp;

  const JsonField& key = values_[kKey];
  const JsonField& key64 = values_[kKeyB64];
  // kconsume writes one of the two: with both, which is meant is a guess.
  if (key.type != JsonType::kMissing && key64.type != JsonType::kMissing)
    return data_error("fields 'key' and 'key_base64' are both present");
  if (key.type == JsonType::kString) {
    out.key = std::string(key.str);
  } else if (key64.type == JsonType::kString) {
    auto bytes = decode_base64(key64.str);
    if (!bytes) return data_error("field 'key_base64': {}", bytes.error().message);
    out.key = std::move(*bytes);
    out.key_is_bytes = true;
  } else if (keep_json_ && key.type != JsonType::kMissing && key.type != JsonType::kNull) {
    // A key decoded with a schema may be any JSON value.
    scratch_.clear();
    append_minified(scratch_, key.raw);
    out.key = scratch_;
  } else if (key.type != JsonType::kMissing && key.type != JsonType::kNull) {
    return data_error("field 'key' is {}, not a string or null", json_type_phrase(key.type));
  }
  if (keep_json_ && key.type != JsonType::kMissing && key.type != JsonType::kNull) {
    scratch_.clear();
    append_minified(scratch_, key.raw);
    out.key_json = scratch_;
  }

  const JsonField& value = values_[kValue];
  const JsonField& value64 = values_[kValueB64];
  if (value.type != JsonType::kMissing && value64.type != JsonType::kMissing)
    return data_error("fields 'value' and 'value_base64' are both present");
  switch (value.type) {
    case JsonType::kString:
      out.value = std::string(value.str);
      break;
    case JsonType::kNull:
      break;
    case JsonType::kMissing:
      if (value64.type != JsonType::kString) return data_error("field 'value' is missing");
      {
        auto bytes = decode_base64(value64.str);
        if (!bytes) return data_error("field 'value_base64': {}", bytes.error().message);
        out.value = std::move(*bytes);
        out.value_is_bytes = true;
      }
      break;
    default:
      scratch_.clear();
      append_minified(scratch_, value.raw);
      out.value = scratch_;
      break;
  }
  if (keep_json_ && value.type != JsonType::kMissing && value.type != JsonType::kNull) {
    scratch_.clear();
    append_minified(scratch_, value.raw);
    out.value_json = scratch_;
  }
  for (auto [slot, name, id] :
       {std::tuple{kKeySchemaId, "key_schema_id", &out.key_schema_id},
        std::tuple{kValueSchemaId, "value_schema_id", &out.value_schema_id}}) {
    auto n = integer_field(values_[slot], name);
    if (!n) return n.take_error();
    if (!*n) continue;
    if (**n < 0 || **n > INT32_MAX) return data_error("field '{}' is out of range", name);
    *id = static_cast<int32_t>(**n);
  }

  const JsonField& headers = values_[kHeaders];
  if (headers.type == JsonType::kMissing || headers.type == JsonType::kNull) return {};
  if (headers.type != JsonType::kArray) return data_error("field 'headers' is not an array");
  auto tree = parse_json(headers.raw);
  if (!tree) return data_error("field 'headers': {}", tree.error().message);
  for (const JsonValue& pair : tree->items) {
    if (pair.type != JsonType::kArray || pair.items.size() != 2 ||
        pair.items[0].type != JsonType::kString)
      return data_error("field 'headers' must hold [name, value] pairs");
    EnvelopeRecord::OwnedHeader h;
    h.name = pair.items[0].str;
    const JsonValue& v = pair.items[1];
    if (v.type == JsonType::kString) {
      h.value = v.str;
    } else if (v.type == JsonType::kObject && v.find("base64") != nullptr &&
               v.find("base64")->type == JsonType::kString) {
      auto bytes = decode_base64(v.find("base64")->str);
      if (!bytes) return data_error("header '{}': {}", h.name, bytes.error().message);
      h.value = std::move(*bytes);
    } else if (v.type != JsonType::kNull) {
      return data_error("header '{}' has {} value", h.name, json_type_phrase(v.type));
    }
    out.headers.push_back(std::move(h));
  }
  return {};
}

Status check_producible_timestamp(std::optional<int64_t> timestamp) {
  if (!timestamp || *timestamp > 0) return {};
  if (*timestamp == 0)
    return data_error("field 'timestamp' is 0, which librdkafka cannot produce (0 is now)");
  return data_error("field 'timestamp' is negative ({}): Kafka timestamps count from the epoch",
                    *timestamp);
}

std::optional<SourcePosition> source_position(std::string_view padded_line) {
  static thread_local JsonReader reader;
  static thread_local FieldSet fields = [] {
    FieldSet f;
    f.add(FieldPath::parse(".topic").value());
    f.add(FieldPath::parse(".partition").value());
    f.add(FieldPath::parse(".offset").value());
    return f;
  }();
  std::vector<JsonField> v;
  if (!reader.read(padded_line, fields, v).ok()) return std::nullopt;
  if (v[0].type != JsonType::kString || v[1].type != JsonType::kNumber || !v[1].is_integer ||
      v[1].integer < INT32_MIN || v[1].integer > INT32_MAX)
    return std::nullopt;
  auto offset = Position::from_json(v[2]);
  if (!offset) return std::nullopt;
  return SourcePosition{std::string(v[0].str), static_cast<int32_t>(v[1].integer),
                        std::move(*offset)};
}

std::optional<std::string_view> record_key_bytes(const JsonField& f, std::string& buffer) {
  switch (f.type) {
    case JsonType::kNull:
    case JsonType::kMissing:
      return std::nullopt;
    case JsonType::kString:
      return f.str;
    case JsonType::kObject:
    case JsonType::kArray:
      buffer.clear();
      append_minified(buffer, f.raw);
      return std::string_view(buffer);
    default:
      return f.raw;
  }
}

}  // namespace kpipe
