// What kconsume and kproduce take for Schema Registry payloads (kpipe(7),
// SCHEMA REGISTRY): plain strings, parsed by the program (programs/
// payloads.h), so that the CLI layer needs no codec.
#pragma once

#include <string>

namespace kpipe {

struct SchemaOptions {
  // json|string|bytes|avro|protobuf|json-schema; empty: the envelope's
  // own rules (kpipe(7), THE ENVELOPE).
  std::string key_format;
  std::string value_format;
  std::string registry;       // --registry URL; empty: $KPIPE_REGISTRY, then --config's
  std::string registry_env;   // $KPIPE_REGISTRY, read by the CLI layer
  std::string registry_auth;  // user:password; empty: --config's basic.auth.user.info
  std::string registry_ca;    // a CA file for https
  // kconsume: how values are written.
  std::string avro_json = "plain";      // plain|standard
  std::string time_format = "rfc3339";  // rfc3339|ms, for timestamp logical types
  // kproduce: which schema values are encoded with.
  std::string subject;      // empty: TOPIC-value
  std::string key_subject;  // empty: TOPIC-key
  std::string schema_file;  // empty: the subject's latest version
  bool auto_register = false;
};

}  // namespace kpipe
