// The HTTP side of the Schema Registry client that needs no connection:
// the base URL taken apart (its credentials kept out of every message), the
// request paths and bodies of Confluent's REST API, and the reading of its
// answers and errors. Pure functions, so that unit tests reach them
// without a server; registry.cpp sends and receives with libcurl.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kpipe/schema/registry.h"
#include "kpipe/status.h"

namespace kpipe {

// A registry's base URL without its credentials, which go to the HTTP
// client apart so that no message can show them.
struct RegistryUrl {
  std::string base;  // "http://host:8081/apis/ccompat/v7": no user info, no trailing '/'
  std::string user;  // from "http://user:password@host", percent-decoded
  std::string password;
  bool has_credentials = false;
};

// A usage_error unless `url` is http:// or https:// with a host (and no
// query or fragment, which the request paths could not follow). Messages
// show the URL without its credentials.
Expected<RegistryUrl> parse_registry_url(std::string_view url);
// `url` with any user info removed, for messages about a URL that may not
// even parse ("user:secret@host:8081" becomes "host:8081").
std::string redact_url(std::string_view url);

// "user:password" (the password may hold ':'). The usage_error does not
// quote it.
struct RegistryCredentials {
  std::string user;
  std::string password;
};
Expected<RegistryCredentials> parse_registry_auth(std::string_view auth);

// Paths under the base URL.
std::string schema_by_id_path(int32_t id);  // "/schemas/ids/42"
// "/subjects/S/versions/3"; `version` -1 is "latest".
std::string subject_version_path(std::string_view subject, int32_t version);
std::string subject_path(std::string_view subject);           // lookup: "/subjects/S"
std::string subject_versions_path(std::string_view subject);  // register: "/subjects/S/versions"

// {"schema": ..., "schemaType": ..., "references": [...]} for lookup and
// registration; schemaType left out for Avro (the API's default, which
// registries that predate the field also take), references when empty.
std::string schema_request_body(const RegisteredSchema& schema);

// The answer to GET /schemas/ids/N (id left 0: the caller knows it) or to
// GET /subjects/S/versions/V (id from the answer). A failure names what is
// wrong with it ("the answer has no 'schema'").
Expected<RegisteredSchema> parse_schema_answer(std::string_view body);
// "PROTOBUF", "JSON", "AVRO"; a failure for any other.
Expected<SchemaType> parse_schema_type(std::string_view name);
// The "id" of an answer to a lookup or a registration.
Expected<int32_t> parse_id_answer(std::string_view body);

// What a registry says went wrong: {"error_code": 40403, "message": "..."}.
// A body that is not that (a proxy's HTML page) gives code 0, no message.
struct RegistryErrorAnswer {
  int64_t error_code = 0;
  std::string message;  // one line, without a final period
};
RegistryErrorAnswer parse_error_answer(std::string_view body);

// Confluent's error codes that name what was not found.
constexpr int64_t kSubjectNotFound = 40401;
constexpr int64_t kVersionNotFound = 40402;
constexpr int64_t kSchemaNotFound = 40403;

// The request an error answers, to say what went wrong in its terms.
struct RegistryRequest {
  enum Kind { kById, kVersion, kLookup, kRegister } kind = kById;
  std::string_view base;  // RegistryUrl::base
  std::string_view url;   // the request's URL, without credentials
  int32_t id = 0;         // kById
  std::string_view subject;
  int32_t version = 0;  // kVersion; -1: latest
};
// The error for an answer that is not 200. Only an id the registry does not
// hold is the record's fault (a data_error: "schema 42 is not in the
// registry at URL"); everything else is a failure that names the URL and
// quotes the registry ("registry URL: subject 'x' not found (404)"). A 404
// of another kind (a base URL that is not the Confluent-compatible API)
// is a failure too, not a record to set aside.
Error answer_error(const RegistryRequest& request, long status, std::string_view body);

// Waits between attempts to reach a registry that does not answer: 100 ms,
// doubling, at most 2 s.
Millis retry_backoff(int attempt);
// The wait after failed attempt `attempt` with `left` ms to the deadline:
// the backoff, cut to end at the deadline, where the last attempt is made.
// A registry that comes up late in --timeout is reached; one that does not
// is tried for the whole of it, not for less.
Millis retry_wait(int attempt, Millis left);

}  // namespace kpipe
