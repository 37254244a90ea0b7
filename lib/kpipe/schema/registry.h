// A Schema Registry, as Confluent's REST API serves it (Confluent's own,
// Apicurio's /apis/ccompat/v7, Redpanda's, Karapace): schemas by id, a
// subject's versions, registration. The codecs take the interface, so that
// their unit tests run on an in-memory registry; open_registry() gives the
// real one, over HTTP with libcurl, the only place here that includes it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

enum class SchemaType { kAvro, kProtobuf, kJson };
// "AVRO", "PROTOBUF", "JSON": the registry's names.
std::string_view schema_type_name(SchemaType type);

// An import of a Protobuf schema (or a named type of an Avro one) that the
// registry keeps under another subject.
struct SchemaReference {
  std::string name;  // the import's path, as the schema spells it
  std::string subject;
  int32_t version = 0;
};

struct RegisteredSchema {
  int32_t id = 0;  // 0 when not registered (yet)
  SchemaType type = SchemaType::kAvro;
  std::string text;  // the schema as the registry holds it
  std::vector<SchemaReference> references;
};

class SchemaRegistry {
 public:
  virtual ~SchemaRegistry() = default;
  // A schema by its id. Ids never change meaning, so callers may cache.
  virtual Expected<RegisteredSchema> by_id(int32_t id) = 0;
  // A subject's version; `version` -1 is the latest.
  virtual Expected<RegisteredSchema> version(std::string_view subject, int32_t version) = 0;
  // The id `schema` has under `subject`: looked up, or registered as the
  // subject's next version when `register_new` (refused by the registry if
  // incompatible: the error says why).
  virtual Expected<int32_t> lookup(std::string_view subject, const RegisteredSchema& schema,
                                   bool register_new) = 0;
  // The registry's address, without credentials, for messages.
  virtual std::string describe() const = 0;
  // Whether the last call failed on the registry's answer that the subject,
  // or the schema under it, is not there: what registering a schema would
  // change. Not when the registry could not be reached, nor when it refused
  // for another reason (credentials, an incompatible schema).
  virtual bool last_not_found() const { return false; }
};

struct RegistryOptions {
  std::string url;      // the Confluent-compatible base URL
  std::string auth;     // "user:password"; empty: none
  std::string ca_file;  // TLS: a CA bundle; empty: the system's
  Millis timeout = 30 * kSecond;
};

// Refuses a URL that is not http(s)://; nothing is fetched before the first
// call. Answers by id are cached for the run.
Expected<std::unique_ptr<SchemaRegistry>> open_registry(const RegistryOptions& options);

}  // namespace kpipe
