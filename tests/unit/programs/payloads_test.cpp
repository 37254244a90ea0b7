#include "kpipe/programs/payloads.h"

#include <catch2/catch.hpp>

#include "closed_port.h"

using namespace kpipe;

namespace {

KafkaConfig with_registry(std::vector<std::pair<std::string, std::string>> props) {
  KafkaConfig c;
  c.timeout = 3 * kSecond;
  c.registry = std::move(props);
  return c;
}

RegistryOptions resolved(const SchemaOptions& o, const KafkaConfig& c) {
  auto r = resolve_registry(o, c);
  if (!r) FAIL("refused: " << r.error().message);
  return *r;
}

}  // namespace

TEST_CASE("resolve_registry: --registry, then KPIPE_REGISTRY, then the client file", "[payloads]") {
  SchemaOptions o;
  KafkaConfig file = with_registry({{"schema.registry.url", "http://file:8081,http://other:8081"},
                                    {"basic.auth.user.info", "svc:pw"},
                                    {"schema.registry.ssl.ca.location", "/ca.pem"}});
  RegistryOptions r = resolved(o, file);
  CHECK(r.url == "http://file:8081");  // Confluent's clients take a list: the first
  CHECK(r.auth == "svc:pw");
  CHECK(r.ca_file == "/ca.pem");
  CHECK(r.timeout == 3 * kSecond);
  o.registry_env = "http://env:8081";
  CHECK(resolved(o, file).url == "http://env:8081");
  o.registry = "http://flag:8081";
  o.registry_auth = "me:secret";
  o.registry_ca = "/mine.pem";
  r = resolved(o, file);
  CHECK(r.url == "http://flag:8081");
  CHECK(r.auth == "me:secret");
  CHECK(r.ca_file == "/mine.pem");
}

TEST_CASE("resolve_registry: basic.auth.user.info only with the USER_INFO source", "[payloads]") {
  SchemaOptions o;
  o.registry = "http://r:8081";
  CHECK(resolved(o, with_registry({{"basic.auth.credentials.source", "URL"},
                                   {"basic.auth.user.info", "a:b"}}))
            .auth.empty());
  CHECK(resolved(o, with_registry({{"schema.registry.basic.auth.user.info", "a:b"}})).auth ==
        "a:b");
}

TEST_CASE("resolve_registry: none given, or auth without a password, are usage errors",
          "[payloads]") {
  SchemaOptions o;
  auto r = resolve_registry(o, with_registry({}));
  REQUIRE_FALSE(r);
  CHECK(r.error().status == ExitStatus::kUsage);
  CHECK(r.error().message ==
        "no Schema Registry given: use --registry URL, set KPIPE_REGISTRY, or put "
        "schema.registry.url in the client properties");
  o.registry = "http://r:8081";
  o.registry_auth = "user-only";
  r = resolve_registry(o, with_registry({}));
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "--registry-auth: expected user:password");
}

TEST_CASE("PayloadDecoder: string and bytes need no registry", "[payloads]") {
  SchemaOptions o;
  o.key_format = "bytes";
  o.value_format = "string";
  auto d = PayloadDecoder::open(o, with_registry({}));
  REQUIRE(d);
  REQUIRE((*d)->active());
  RecordView r;
  std::string v = "{}";
  r.value = v;
  REQUIRE((*d)->decode(r).ok());
  CHECK(r.key_as == RecordView::As::kBytes);
  CHECK(r.value_as == RecordView::As::kString);
  SchemaOptions none;
  auto inactive = PayloadDecoder::open(none, with_registry({}));
  REQUIRE(inactive);
  CHECK_FALSE((*inactive)->active());
}

TEST_CASE("PayloadDecoder: the formats and options are checked before anything is asked",
          "[payloads]") {
  SchemaOptions o;
  o.value_format = "avr";
  auto d = PayloadDecoder::open(o, with_registry({}));
  REQUIRE_FALSE(d);
  CHECK(d.error().status == ExitStatus::kUsage);
  CHECK(d.error().message.find("did you mean 'avro'") != std::string::npos);
  o.value_format = "avro";
  o.time_format = "iso";
  d = PayloadDecoder::open(o, with_registry({}));
  REQUIRE_FALSE(d);
  CHECK(d.error().message.find("--time-format") != std::string::npos);
  o.time_format = "ms";
  d = PayloadDecoder::open(o, with_registry({}));
  REQUIRE_FALSE(d);
  CHECK(d.error().message.find("no Schema Registry given") == 0);
}

TEST_CASE("PayloadWriter: options that need a schema format, and kproduce's formats",
          "[payloads]") {
  KafkaConfig c = with_registry({});
  auto refused = [&](const SchemaOptions& o) {
    auto w = PayloadWriter::open(o, c, "orders");
    REQUIRE_FALSE(w);
    CHECK(w.error().status == ExitStatus::kUsage);
    return w.error().message;
  };
  SchemaOptions schema_only;
  schema_only.schema_file = "x.avsc";
  CHECK(refused(schema_only) ==
        "--subject, --schema and --auto-register need --value-format avro, protobuf or "
        "json-schema");
  SchemaOptions register_nothing;
  register_nothing.value_format = "avro";
  register_nothing.registry = "http://r:8081";
  register_nothing.auto_register = true;
  CHECK(refused(register_nothing) == "--auto-register needs --schema FILE: the schema to register");
  SchemaOptions bytes;
  bytes.value_format = "bytes";
  CHECK(refused(bytes).find("kproduce takes json, avro, protobuf or json-schema") !=
        std::string::npos);
  SchemaOptions key_subject;
  key_subject.key_subject = "orders-key";
  CHECK(refused(key_subject) == "--key-subject needs --key-format avro, protobuf or json-schema");
  SchemaOptions json;
  json.value_format = "json";
  auto w = PayloadWriter::open(json, c, "orders");
  REQUIRE(w);
  CHECK_FALSE((*w)->encodes_value());
  CHECK_FALSE((*w)->encodes_key());
}

TEST_CASE("PayloadWriter: a registry out of reach gets no --auto-register hint", "[payloads]") {
  // --auto-register needs the same registry: the hint would send the user
  // the wrong way.
  KafkaConfig c = with_registry({});
  c.timeout = 200;
  SchemaOptions o;
  o.value_format = "avro";
  int port = closed_port();
  o.registry = fmt::format("http://127.0.0.1:{}", port);
  auto w = PayloadWriter::open(o, c, "orders");
  REQUIRE_FALSE(w);
  CHECK(
      w.error().message.find(fmt::format("--value-format avro: registry http://127.0.0.1:{}/"
                                         "subjects/orders-value/versions/latest: cannot connect: ",
                                         port)) == 0);
  CHECK(w.error().message.find("auto-register") == std::string::npos);
}
