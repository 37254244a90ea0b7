// Keys and values in a Schema Registry's formats, for kconsume (decoding
// into the envelope) and kproduce (encoding from it): kpipe(7), SCHEMA
// REGISTRY. The registry is opened only when a format needs it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kpipe/envelope.h"
#include "kpipe/kafka/config.h"
#include "kpipe/schema/codec.h"
#include "kpipe/schema_options.h"
#include "kpipe/status.h"

namespace kpipe {

// Where the registry is and how to reach it: --registry, else
// $KPIPE_REGISTRY, else the client file's schema.registry.url; credentials
// from --registry-auth, else basic.auth.user.info (Confluent's names).
Expected<RegistryOptions> resolve_registry(const SchemaOptions& options, const KafkaConfig& config);

// kconsume --key-format / --value-format.
class PayloadDecoder {
 public:
  static Expected<std::unique_ptr<PayloadDecoder>> open(const SchemaOptions& options,
                                                        const KafkaConfig& config);
  ~PayloadDecoder();

  // Whether decode() has anything to do.
  bool active() const { return active_; }
  // Sets how `r` is shown, decoding what needs a schema into buffers of
  // its own (valid until the next call). A data_error says which payload
  // and why ("value: avro: payload of schema 3 is truncated"); a failure
  // (the registry out of reach) stops the program.
  Status decode(RecordView& r);

 private:
  PayloadDecoder() = default;
  bool active_ = false;
  RecordView::As key_as_ = RecordView::As::kAuto;
  RecordView::As value_as_ = RecordView::As::kAuto;
  std::unique_ptr<SchemaRegistry> registry_;
  std::unique_ptr<ValueCodec> key_codec_;
  std::unique_ptr<ValueCodec> value_codec_;
  std::string key_buffer_;
  std::string value_buffer_;
};

// kproduce --key-format / --value-format.
class PayloadWriter {
 public:
  // `topic` names the default subjects, TOPIC-key and TOPIC-value.
  static Expected<std::unique_ptr<PayloadWriter>> open(const SchemaOptions& options,
                                                       const KafkaConfig& config,
                                                       std::string_view topic);
  ~PayloadWriter();

  bool encodes_key() const { return key_.codec != nullptr; }
  bool encodes_value() const { return value_.codec != nullptr; }
  // The encoding of one JSON value, with the schema `schema_id` (an
  // envelope's key_schema_id or value_schema_id) or else the subject's.
  // Valid until the next call of the same kind.
  Expected<std::string_view> key(std::string_view json, std::optional<int32_t> schema_id);
  Expected<std::string_view> value(std::string_view json, std::optional<int32_t> schema_id);

 private:
  // What keys, or values, are encoded with.
  struct Side {
    const char* option = "";  // --key-format or --value-format
    std::string format;       // as the option gave it
    PayloadFormat type = PayloadFormat::kJson;
    // The subject's latest id, or --schema's, for records that name no
    // schema of their own; else why there is none (the subject is not
    // there, or holds another type), said at the first such record: a
    // record read and produced again needs no subject (kpipe(7), SCHEMA
    // REGISTRY).
    std::optional<int32_t> id;
    Error no_id;
    std::unique_ptr<ValueCodec> codec;
    std::string buffer;
  };

  PayloadWriter() = default;
  Status find_subject(Side& side, std::string_view subject);
  Expected<std::string_view> encode(Side& side, const char* what, std::string_view json,
                                    std::optional<int32_t> schema_id);

  std::unique_ptr<SchemaRegistry> registry_;
  Side key_;
  Side value_;
};

}  // namespace kpipe
