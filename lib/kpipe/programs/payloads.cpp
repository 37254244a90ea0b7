#include "kpipe/programs/payloads.h"

#include <fstream>
#include <sstream>

#include "kpipe/choices.h"
#include "kpipe/schema/codec_factory.h"

namespace kpipe {

namespace {

const std::string* registry_property(const KafkaConfig& config, std::string_view key) {
  const std::string* found = nullptr;
  for (const auto& [k, v] : config.registry)
    if (k == key) found = &v;  // later wins, as for every property
  return found;
}

// The option's format, or nullopt when not given.
Expected<std::optional<PayloadFormat>> format_of(std::string_view option, std::string_view text,
                                                 bool writing) {
  if (text.empty()) return std::optional<PayloadFormat>{};
  auto f = parse_payload_format(option, text);
  if (!f) return f.take_error();
  if (writing && (*f == PayloadFormat::kString || *f == PayloadFormat::kBytes))
    return usage_error(
        "{} {}: kproduce takes json, avro, protobuf or json-schema (an envelope says itself "
        "whether a payload is text or bytes)",
        option, text);
  return std::optional<PayloadFormat>{*f};
}

Expected<std::unique_ptr<SchemaRegistry>> open_for(const SchemaOptions& options,
                                                   const KafkaConfig& config) {
  auto registry = resolve_registry(options, config);
  if (!registry) return registry.take_error();
  return open_registry(*registry);
}

DecodeOptions decode_options(const SchemaOptions& options, Status& status) {
  DecodeOptions d;
  auto json = parse_choice("--avro-json", options.avro_json, {"plain", "standard"});
  auto time = parse_choice("--time-format", options.time_format, {"rfc3339", "ms"});
  if (!json) {
    status = json.take_error();
  } else if (!time) {
    status = time.take_error();
  } else {
    d.avro_standard_json = *json == 1;
    d.epoch_millis = *time == 1;
  }
  return d;
}

}  // namespace

Expected<RegistryOptions> resolve_registry(const SchemaOptions& options,
                                           const KafkaConfig& config) {
  RegistryOptions r;
  r.url = options.registry;
  if (r.url.empty()) r.url = options.registry_env;
  if (r.url.empty()) {
    if (const std::string* url = registry_property(config, "schema.registry.url")) r.url = *url;
  }
  // Confluent's clients take a list; the first is enough for a tool.
  if (size_t comma = r.url.find(','); comma != std::string::npos) r.url.resize(comma);
  if (r.url.empty())
    return usage_error(
        "no Schema Registry given: use --registry URL, set KPIPE_REGISTRY, or put "
        "schema.registry.url in the client properties");
  r.auth = options.registry_auth;
  if (r.auth.empty()) {
    const std::string* source = registry_property(config, "basic.auth.credentials.source");
    const std::string* info = registry_property(config, "basic.auth.user.info");
    if (info == nullptr) info = registry_property(config, "schema.registry.basic.auth.user.info");
    if (info != nullptr && (source == nullptr || *source == "USER_INFO")) r.auth = *info;
  }
  if (!r.auth.empty() && r.auth.find(':') == std::string::npos)
    return usage_error("--registry-auth: expected user:password");
  r.ca_file = options.registry_ca;
  if (r.ca_file.empty()) {
    if (const std::string* ca = registry_property(config, "schema.registry.ssl.ca.location"))
      r.ca_file = *ca;
  }
  r.timeout = config.timeout;
  return r;
}

PayloadDecoder::~PayloadDecoder() = default;

Expected<std::unique_ptr<PayloadDecoder>> PayloadDecoder::open(const SchemaOptions& options,
                                                               const KafkaConfig& config) {
  std::unique_ptr<PayloadDecoder> d(new PayloadDecoder());
  auto key = format_of("--key-format", options.key_format, false);
  if (!key) return key.take_error();
  auto value = format_of("--value-format", options.value_format, false);
  if (!value) return value.take_error();
  Status bad;
  DecodeOptions decoding = decode_options(options, bad);
  KPIPE_TRY(bad);
  bool needs_registry = (*key && uses_registry(**key)) || (*value && uses_registry(**value));
  if (needs_registry) {
    auto registry = open_for(options, config);
    if (!registry) return registry.take_error();
    d->registry_ = std::move(*registry);
  }
  auto setup = [&](std::optional<PayloadFormat> f, RecordView::As& as,
                   std::unique_ptr<ValueCodec>& codec) {
    if (!f) return;
    d->active_ = true;
    switch (*f) {
      case PayloadFormat::kJson:
        as = RecordView::As::kAuto;
        break;
      case PayloadFormat::kString:
        as = RecordView::As::kString;
        break;
      case PayloadFormat::kBytes:
        as = RecordView::As::kBytes;
        break;
      default:
        as = RecordView::As::kJson;
        codec = make_codec(*f, *d->registry_, decoding);
        break;
    }
  };
  setup(*key, d->key_as_, d->key_codec_);
  setup(*value, d->value_as_, d->value_codec_);
  return d;
}

Status PayloadDecoder::decode(RecordView& r) {
  r.key_as = key_as_;
  r.value_as = value_as_;
  if (key_codec_ != nullptr && r.key) {
    key_buffer_.clear();
    auto id = key_codec_->decode(*r.key, key_buffer_);
    if (!id) return Error{id.error().status, "key: " + id.error().message};
    r.key = key_buffer_;
    r.key_schema_id = *id;
  }
  if (value_codec_ != nullptr && r.value) {
    value_buffer_.clear();
    auto id = value_codec_->decode(*r.value, value_buffer_);
    if (!id) return Error{id.error().status, "value: " + id.error().message};
    r.value = value_buffer_;
    r.value_schema_id = *id;
  }
  return {};
}

PayloadWriter::~PayloadWriter() = default;

Expected<std::unique_ptr<PayloadWriter>> PayloadWriter::open(const SchemaOptions& options,
                                                             const KafkaConfig& config,
                                                             std::string_view topic) {
  std::unique_ptr<PayloadWriter> w(new PayloadWriter());
  auto key = format_of("--key-format", options.key_format, true);
  if (!key) return key.take_error();
  auto value = format_of("--value-format", options.value_format, true);
  if (!value) return value.take_error();
  bool key_schema = *key && uses_registry(**key);
  bool value_schema = *value && uses_registry(**value);
  if (!value_schema &&
      (!options.schema_file.empty() || options.auto_register || !options.subject.empty()))
    return usage_error(
        "--subject, --schema and --auto-register need --value-format avro, protobuf or "
        "json-schema");
  if (!key_schema && !options.key_subject.empty())
    return usage_error("--key-subject needs --key-format avro, protobuf or json-schema");
  if (options.auto_register && options.schema_file.empty())
    return usage_error("--auto-register needs --schema FILE: the schema to register");
  if (!key_schema && !value_schema) return w;
  auto registry = open_for(options, config);
  if (!registry) return registry.take_error();
  w->registry_ = std::move(*registry);
  SchemaRegistry& reg = *w->registry_;
  DecodeOptions unused;
  if (key_schema) {
    Side& k = w->key_;
    k.option = "--key-format";
    k.format = options.key_format;
    k.type = **key;
    k.codec = make_codec(k.type, reg, unused);
    KPIPE_TRY(w->find_subject(
        k, options.key_subject.empty() ? fmt::format("{}-key", topic) : options.key_subject));
  }
  if (value_schema) {
    Side& v = w->value_;
    v.option = "--value-format";
    v.format = options.value_format;
    v.type = **value;
    v.codec = make_codec(v.type, reg, unused);
    std::string subject =
        options.subject.empty() ? fmt::format("{}-value", topic) : options.subject;
    if (options.schema_file.empty()) {
      KPIPE_TRY(w->find_subject(v, subject));
    } else {
      std::ifstream in(options.schema_file, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      if (!in) return failure("--schema '{}': cannot read it", options.schema_file);
      RegisteredSchema schema;
      schema.type = schema_type_of(v.type);
      schema.text = text.str();
      auto id = reg.lookup(subject, schema, options.auto_register);
      // Registering is the remedy only where the registry answered that
      // the schema is not there; not for a registry out of reach, which
      // --auto-register needs as much.
      if (!id)
        return failure("--schema '{}': {}{}", options.schema_file, id.error().message,
                       options.auto_register || !reg.last_not_found()
                           ? ""
                           : " (--auto-register registers it)");
      v.id = *id;
    }
  }
  return w;
}

// The subject is asked for at once, so that a registry out of reach (or
// one refusing the credentials) stops kproduce before any record; what it
// answers about the subject matters only to records that name no schema.
Status PayloadWriter::find_subject(Side& side, std::string_view subject) {
  auto latest = registry_->version(subject, -1);
  if (!latest) {
    if (!registry_->last_not_found())
      return failure("{} {}: {}", side.option, side.format, latest.error().message);
    side.no_id =
        failure("{} {}: {}{}", side.option, side.format, latest.error().message,
                &side == &value_ ? " (give --schema FILE --auto-register to register one)" : "");
    return {};
  }
  if (latest->type != schema_type_of(side.type)) {
    side.no_id = failure("{} {}: subject '{}' holds a {} schema", side.option, side.format, subject,
                         schema_type_name(latest->type));
    return {};
  }
  side.id = latest->id;
  return {};
}

Expected<std::string_view> PayloadWriter::encode(Side& side, const char* what,
                                                 std::string_view json,
                                                 std::optional<int32_t> schema_id) {
  if (!schema_id) {
    if (!side.id) return side.no_id;
    schema_id = side.id;
  }
  side.buffer.clear();
  Status s = side.codec->encode(json, *schema_id, side.buffer);
  if (!s.ok()) return Error{s.error().status, fmt::format("{}: {}", what, s.error().message)};
  return std::string_view(side.buffer);
}

Expected<std::string_view> PayloadWriter::key(std::string_view json,
                                              std::optional<int32_t> schema_id) {
  return encode(key_, "key", json, schema_id);
}

Expected<std::string_view> PayloadWriter::value(std::string_view json,
                                                std::optional<int32_t> schema_id) {
  return encode(value_, "value", json, schema_id);
}

}  // namespace kpipe
