#include "kpipe/schema/protobuf_codec.h"

#include <fmt/format.h>
#include <google/protobuf/compiler/parser.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/type.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>

#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace kpipe {

namespace {

namespace pb = google::protobuf;

constexpr const char* kTypeUrlPrefix = "type.googleapis.com";
// Imports deeper than this are taken for a cycle among the registry's
// references (protoc refuses cyclic imports; a registry may not).
constexpr int kMaxReferenceDepth = 64;

// libprotobuf's messages are sentences; ours are not.
std::string without_period(std::string s) {
  while (!s.empty() && (s.back() == '.' || s.back() == ' ')) s.pop_back();
  return s;
}

// json_util's messages start with where in the value: ": why" at the top.
std::string json_util_message(const pb::util::Status& status) {
  pb::StringPiece m = status.message();
  while (!m.empty() && (m[0] == ':' || m[0] == ' ')) m.remove_prefix(1);
  return without_period(std::string(m.data(), m.size()));
}

// The first error of the tokenizer or parser, as "line L:C: why"; later
// ones mostly follow from it.
class ParseErrors : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!first_.empty()) return;
    first_ = fmt::format("line {}:{}: {}", line + 1, column + 1, without_period(message));
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// The first error of building a parsed file, placed in its text by the
// locations the parser recorded.
class BuildErrors : public pb::DescriptorPool::ErrorCollector {
 public:
  explicit BuildErrors(const pb::compiler::SourceLocationTable& locations)
      : locations_(locations) {}
  void AddError(const std::string&, const std::string&, const pb::Message* descriptor,
                ErrorLocation location, const std::string& message) override {
    if (!first_.empty()) return;
    int line = 0;
    int column = 0;
    if (locations_.Find(descriptor, location, &line, &column)) {
      first_ = fmt::format("line {}:{}: {}", line + 1, column + 1, without_period(message));
      return;
    }
    first_ = without_period(message);
  }
  const std::string& first() const { return first_; }

 private:
  const pb::compiler::SourceLocationTable& locations_;
  std::string first_;
};

// One .proto text, parsed. `locations` points into `proto`, so neither
// moves: the file lives behind a pointer.
struct ParsedFile {
  pb::FileDescriptorProto proto;
  pb::compiler::SourceLocationTable locations;
  std::vector<SchemaReference> references;
};

// On error, the parser's first error.
Expected<std::unique_ptr<ParsedFile>> parse_proto(const RegisteredSchema& schema,
                                                  const std::string& name) {
  auto file = std::make_unique<ParsedFile>();
  pb::io::ArrayInputStream input(schema.text.data(), static_cast<int>(schema.text.size()));
  ParseErrors errors;
  pb::io::Tokenizer tokenizer(&input, &errors);
  pb::compiler::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.RecordSourceLocationsTo(&file->locations);
  if (!parser.Parse(&tokenizer, &file->proto) || !errors.first().empty())
    return data_error(errors.first().empty() ? std::string("unknown error") : errors.first());
  file->proto.set_name(name);
  file->references = schema.references;
  return file;
}

// json_util's own resolver turns descriptors into google.protobuf.Type
// messages on every call, and MessageToJsonString makes a new one for every
// message: this one keeps what it has turned, for the life of its pool.
class CachingTypeResolver : public pb::util::TypeResolver {
 public:
  explicit CachingTypeResolver(const pb::DescriptorPool* pool)
      : inner_(pb::util::NewTypeResolverForDescriptorPool(kTypeUrlPrefix, pool)) {}

  pb::util::Status ResolveMessageType(const std::string& type_url, pb::Type* type) override {
    auto it = types_.find(type_url);
    if (it == types_.end()) {
      pb::Type resolved;
      auto status = inner_->ResolveMessageType(type_url, &resolved);
      if (!status.ok()) return status;
      it = types_.emplace(type_url, std::move(resolved)).first;
    }
    type->CopyFrom(it->second);
    return pb::util::Status();
  }
  pb::util::Status ResolveEnumType(const std::string& type_url, pb::Enum* type) override {
    auto it = enums_.find(type_url);
    if (it == enums_.end()) {
      pb::Enum resolved;
      auto status = inner_->ResolveEnumType(type_url, &resolved);
      if (!status.ok()) return status;
      it = enums_.emplace(type_url, std::move(resolved)).first;
    }
    type->CopyFrom(it->second);
    return pb::util::Status();
  }

 private:
  std::unique_ptr<pb::util::TypeResolver> inner_;
  std::unordered_map<std::string, pb::Type> types_;
  std::unordered_map<std::string, pb::Enum> enums_;
};

// A message type of a schema, with the object its records are read into.
struct MessageType {
  std::unique_ptr<pb::Message> message;
  std::string type_url;
  std::string indexes;  // as encode writes them after the frame
};

// One registry schema, built. Each has its own pool: the versions of a
// subject define the same full names, which one pool would refuse. Members
// are destroyed in reverse order: messages before the factory that made
// them, the factory before the descriptors it read.
struct Schema {
  std::unique_ptr<pb::DescriptorPool> pool;
  std::unique_ptr<pb::DynamicMessageFactory> factory;
  std::unique_ptr<CachingTypeResolver> resolver;
  const pb::FileDescriptor* file = nullptr;
  std::unordered_map<const pb::Descriptor*, MessageType> types;
};

void append_zigzag_varint(std::string& out, int64_t v) {
  auto u = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (u >= 0x80) {
    out.push_back(static_cast<char>((u & 0x7f) | 0x80));
    u >>= 7;
  }
  out.push_back(static_cast<char>(u));
}

// False when `in` ends within the varint or it runs past 64 bits.
bool read_zigzag_varint(std::string_view& in, int64_t& v) {
  uint64_t u = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    u |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      v = static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
      return true;
    }
  }
  return false;
}

// Confluent's message indexes: the path from the file to the type, through
// nested types. [0], the common case, is written as the single byte 0.
std::string message_indexes(const pb::Descriptor* type) {
  std::vector<int> path;
  for (const pb::Descriptor* d = type; d != nullptr; d = d->containing_type())
    path.push_back(d->index());
  std::string out;
  if (path.size() == 1 && path[0] == 0) {
    out.push_back('\0');
    return out;
  }
  append_zigzag_varint(out, static_cast<int64_t>(path.size()));
  for (auto it = path.rbegin(); it != path.rend(); ++it) append_zigzag_varint(out, *it);
  return out;
}

std::string index_list(const std::vector<int64_t>& indexes) {
  return fmt::format("[{}]", fmt::join(indexes, ","));
}

class ProtobufCodec : public ValueCodec {
 public:
  ProtobufCodec(SchemaRegistry& registry, std::string encode_message)
      : registry_(registry), encode_message_(std::move(encode_message)) {
    print_options_.always_print_primitive_fields = true;
    parse_options_.ignore_unknown_fields = false;
  }

  Expected<int32_t> decode(std::string_view bytes, std::string& out) override {
    auto framed = unframe(bytes);
    if (!framed) return data_error("protobuf: {}", framed.error().message);
    int32_t id = framed->schema_id;
    auto schema = schema_for(id);
    if (!schema) return schema.take_error();
    std::string_view payload = framed->payload;
    KPIPE_TRY(read_indexes(payload, id));
    auto type = type_at(**schema, id);
    if (!type) return type.take_error();
    pb::Message& message = *(*type)->message;
    // libprotobuf logs a string that is not UTF-8 as it refuses it.
    pb::LogSilencer silence;
    if (!message.ParseFromArray(payload.data(), static_cast<int>(payload.size())))
      return data_error("protobuf: payload of schema {} does not parse as {}", id,
                        message.GetDescriptor()->full_name());
    // Serialised again, not the payload itself, since the JSON writer
    // checks nothing: it would write a repeated field twice, or a record
    // cut short as far as it goes.
    scratch_.clear();
    message.SerializeToString(&scratch_);
    size_t at = out.size();
    auto status = pb::util::BinaryToJsonString((*schema)->resolver.get(), (*type)->type_url,
                                               scratch_, &out, print_options_);
    if (!status.ok()) {
      out.resize(at);
      return data_error("protobuf: payload of schema {} has no JSON form as {}: {}", id,
                        message.GetDescriptor()->full_name(), json_util_message(status));
    }
    return id;
  }

  Status encode(std::string_view json, int32_t schema_id, std::string& out) override {
    auto schema = schema_for(schema_id);
    if (!schema) return schema.take_error();
    auto type = encode_type(**schema, schema_id);
    if (!type) return type.take_error();
    pb::Message& message = *(*type)->message;
    pb::LogSilencer silence;
    const std::string& name = message.GetDescriptor()->full_name();
    scratch_.clear();
    auto status = pb::util::JsonToBinaryString((*schema)->resolver.get(), (*type)->type_url,
                                               pb::StringPiece(json.data(), json.size()), &scratch_,
                                               parse_options_);
    if (!status.ok())
      return data_error("protobuf: invalid JSON for {}: {}", name, json_util_message(status));
    // Read back into the message so that what is written is in field
    // order, maps sorted by key: the same JSON gives the same bytes.
    if (!message.ParsePartialFromString(scratch_))
      return data_error("protobuf: invalid JSON for {}: not encodable", name);
    if (!message.IsInitialized())
      return data_error("protobuf: invalid JSON for {}: missing required fields {}", name,
                        message.InitializationErrorString());
    append_frame(out, schema_id);
    out.append((*type)->indexes);
    message.ByteSizeLong();  // the sizes SerializeWithCachedSizes writes
    // A string grows as needed: the stream cannot fail.
    pb::io::StringOutputStream stream(&out);
    pb::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeWithCachedSizes(&coded);
    return {};
  }

 private:
  Expected<Schema*> schema_for(int32_t id) {
    if (auto it = schemas_.find(id); it != schemas_.end()) return it->second.get();
    if (auto it = broken_.find(id); it != broken_.end()) return it->second;
    auto built = build(id);
    if (!built) {
      // Ids never change meaning: a schema that is not one stays so. A
      // failure (the registry out of reach) ends the run anyway.
      if (built.error().status == ExitStatus::kDataError) broken_.emplace(id, built.error());
      return built.take_error();
    }
    Schema* schema = built->get();
    schemas_.emplace(id, std::move(*built));
    return schema;
  }

  Expected<std::unique_ptr<Schema>> build(int32_t id) {
    auto registered = registry_.by_id(id);
    if (!registered) return registered.take_error();
    if (registered->type != SchemaType::kProtobuf)
      return data_error("protobuf: schema {} is {}, not PROTOBUF", id,
                        schema_type_name(registered->type));
    // The parser warns through libprotobuf's log (a file without a syntax
    // line), and the library never prints.
    pb::LogSilencer silence;
    auto parsed = parse_proto(*registered, fmt::format("schema-{}.proto", id));
    if (!parsed)
      return data_error("protobuf: schema {} does not parse: {}", id, parsed.error().message);
    auto schema = std::make_unique<Schema>();
    // Well-known imports (google/protobuf/timestamp.proto ...) come from
    // the descriptors compiled into libprotobuf.
    schema->pool = std::make_unique<pb::DescriptorPool>(pb::DescriptorPool::generated_pool());
    KPIPE_TRY(add_references(*schema->pool, registered->references, id, 0));
    BuildErrors errors((*parsed)->locations);
    schema->file = schema->pool->BuildFileCollectingErrors((*parsed)->proto, &errors);
    if (schema->file == nullptr)
      return data_error("protobuf: schema {} does not build: {}", id, errors.first());
    schema->factory = std::make_unique<pb::DynamicMessageFactory>();
    schema->resolver = std::make_unique<CachingTypeResolver>(schema->pool.get());
    return schema;
  }

  // Builds the imports that the registry keeps under other subjects, theirs
  // first.
  Status add_references(pb::DescriptorPool& pool, const std::vector<SchemaReference>& references,
                        int32_t id, int depth) {
    for (const SchemaReference& ref : references) {
      if (pool.FindFileByName(ref.name) != nullptr) continue;  // well-known, or built already
      if (depth >= kMaxReferenceDepth)
        return data_error("protobuf: schema {}: references nest deeper than {}", id,
                          kMaxReferenceDepth);
      auto file = reference(ref, id);
      if (!file) return file.take_error();
      KPIPE_TRY(add_references(pool, (*file)->references, id, depth + 1));
      BuildErrors errors((*file)->locations);
      if (pool.BuildFileCollectingErrors((*file)->proto, &errors) == nullptr)
        return data_error(
            "protobuf: schema {}: import '{}' (subject '{}' version {}) does not build: {}", id,
            ref.name, ref.subject, ref.version, errors.first());
    }
    return {};
  }

  Expected<const ParsedFile*> reference(const SchemaReference& ref, int32_t id) {
    auto key = std::make_tuple(ref.subject, ref.version, ref.name);
    if (auto it = references_.find(key); it != references_.end()) return it->second.get();
    auto registered = registry_.version(ref.subject, ref.version);
    if (!registered) {
      Error e = registered.take_error();
      e.message = fmt::format("protobuf: schema {}: import '{}': {}", id, ref.name, e.message);
      return e;
    }
    if (registered->type != SchemaType::kProtobuf)
      return data_error(
          "protobuf: schema {}: import '{}' (subject '{}' version {}) is {}, not PROTOBUF", id,
          ref.name, ref.subject, ref.version, schema_type_name(registered->type));
    auto parsed = parse_proto(*registered, ref.name);
    if (!parsed)
      return data_error(
          "protobuf: schema {}: import '{}' (subject '{}' version {}) does not parse: {}", id,
          ref.name, ref.subject, ref.version, parsed.error().message);
    const ParsedFile* file = parsed->get();
    references_.emplace(std::move(key), std::move(*parsed));
    return file;
  }

  // Reads the message indexes at the start of `payload` into indexes_ and
  // leaves `payload` after them.
  Status read_indexes(std::string_view& payload, int32_t id) {
    indexes_.clear();
    int64_t count = 0;
    if (!read_zigzag_varint(payload, count))
      return data_error("protobuf: message indexes of schema {} are truncated", id);
    if (count == 0) {
      indexes_.push_back(0);
      return {};
    }
    // Each index takes a byte at least.
    if (count < 0 || static_cast<uint64_t>(count) > payload.size())
      return data_error("protobuf: message indexes of schema {} are truncated ({} announced)", id,
                        count);
    for (int64_t i = 0; i < count; ++i) {
      int64_t index = 0;
      if (!read_zigzag_varint(payload, index))
        return data_error("protobuf: message indexes of schema {} are truncated", id);
      indexes_.push_back(index);
    }
    return {};
  }

  // The type indexes_ lead to.
  Expected<MessageType*> type_at(Schema& schema, int32_t id) {
    const pb::Descriptor* type = nullptr;
    for (int64_t index : indexes_) {
      int count = type == nullptr ? schema.file->message_type_count() : type->nested_type_count();
      if (index < 0 || index >= count)
        return data_error("protobuf: message index {} is out of range for schema {}",
                          index_list(indexes_), id);
      auto i = static_cast<int>(index);
      type = type == nullptr ? schema.file->message_type(i) : type->nested_type(i);
    }
    return &type_of(schema, type);
  }

  Expected<MessageType*> encode_type(Schema& schema, int32_t id) {
    if (encode_message_.empty()) {
      if (schema.file->message_type_count() == 0)
        return data_error("protobuf: schema {} defines no message", id);
      return &type_of(schema, schema.file->message_type(0));
    }
    const pb::Descriptor* type = schema.pool->FindMessageTypeByName(encode_message_);
    // Message indexes reach the schema's own types only.
    if (type == nullptr || type->file() != schema.file)
      return data_error("protobuf: schema {} defines no message '{}'", id, encode_message_);
    return &type_of(schema, type);
  }

  MessageType& type_of(Schema& schema, const pb::Descriptor* descriptor) {
    auto [it, added] = schema.types.try_emplace(descriptor);
    if (added) {
      it->second.message.reset(schema.factory->GetPrototype(descriptor)->New());
      it->second.type_url = fmt::format("{}/{}", kTypeUrlPrefix, descriptor->full_name());
      it->second.indexes = message_indexes(descriptor);
    }
    return it->second;
  }

  SchemaRegistry& registry_;
  std::string encode_message_;
  pb::util::JsonPrintOptions print_options_;
  pb::util::JsonParseOptions parse_options_;
  std::unordered_map<int32_t, std::unique_ptr<Schema>> schemas_;
  std::unordered_map<int32_t, Error> broken_;
  // Imports by subject, version and name: versions of one subject share them.
  std::map<std::tuple<std::string, int32_t, std::string>, std::unique_ptr<ParsedFile>> references_;
  std::vector<int64_t> indexes_;
  std::string scratch_;
};

}  // namespace

std::unique_ptr<ValueCodec> make_protobuf_codec(SchemaRegistry& registry,
                                                const DecodeOptions& options) {
  return make_protobuf_codec(registry, options, std::string());
}

std::unique_ptr<ValueCodec> make_protobuf_codec(SchemaRegistry& registry, const DecodeOptions&,
                                                std::string encode_message) {
  return std::make_unique<ProtobufCodec>(registry, std::move(encode_message));
}

}  // namespace kpipe
