#include "kpipe/schema/registry.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "closed_port.h"
#include "kpipe/schema/registry_http.h"

using namespace kpipe;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

constexpr std::string_view kBase = "http://127.0.0.1:8081/apis/ccompat/v7";

RegistryRequest request(RegistryRequest::Kind kind, std::string_view url) {
  RegistryRequest r;
  r.kind = kind;
  r.base = kBase;
  r.url = url;
  return r;
}

}  // namespace

// --- URLs ------------------------------------------------------------------------

TEST_CASE("parse_registry_url: the base URL, without a trailing slash", "[registry]") {
  auto u = parse_registry_url("http://127.0.0.1:8081/apis/ccompat/v7/");
  REQUIRE(u.ok());
  CHECK(u->base == "http://127.0.0.1:8081/apis/ccompat/v7");
  CHECK_FALSE(u->has_credentials);
  CHECK(parse_registry_url("https://registry.example.com")->base == "https://registry.example.com");
  CHECK(parse_registry_url("HTTPS://registry.example.com//")->base ==
        "https://registry.example.com");
  CHECK(parse_registry_url("http://[::1]:8081")->base == "http://[::1]:8081");
}

TEST_CASE("parse_registry_url: credentials leave the URL, percent-decoded", "[registry]") {
  auto u = parse_registry_url("https://al%40ice:pa%3Ass:w@sr.example.com:8443/ccompat");
  REQUIRE(u.ok());
  CHECK(u->base == "https://sr.example.com:8443/ccompat");
  CHECK(u->has_credentials);
  CHECK(u->user == "al@ice");
  CHECK(u->password == "pa:ss:w");
}

TEST_CASE("parse_registry_url: a password holding '/', '?' or '#' unencoded stays out of the URL",
          "[registry]") {
  // libcurl was given "http://u:pa/SECRET@127.0.0.1:1" whole, and its
  // error quoted nothing, but every message named that URL.
  auto u = parse_registry_url("http://u:pa/SECRET@127.0.0.1:8081/ccompat");
  REQUIRE(u.ok());
  CHECK(u->base == "http://127.0.0.1:8081/ccompat");
  CHECK(u->password == "pa/SECRET");
  u = parse_registry_url("http://u:pa?SE#CRET@host");
  REQUIRE(u.ok());
  CHECK(u->base == "http://host");
  CHECK(u->password == "pa?SE#CRET");
  CHECK(redact_url("http://u:pa/SECRET@host/x") == "http://host/x");
  CHECK(redact_url("ftp://u:pa/SECRET@host") == "ftp://host");
  // An '@' after a port or in a path is no user info.
  CHECK(parse_registry_url("http://host:8081/a@b")->base == "http://host:8081/a@b");
  CHECK(parse_registry_url("http://host/a@b")->base == "http://host/a@b");
}

TEST_CASE("parse_registry_url: refuses what is not http(s), without quoting a password",
          "[registry]") {
  auto e = parse_registry_url("kafka://bob:s3cret@host:9092");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().status == ExitStatus::kUsage);
  CHECK(e.error().message == "registry URL 'kafka://host:9092' is not http:// or https://");

  e = parse_registry_url("bob:s3cret@localhost:8081");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message == "registry URL 'localhost:8081' has no http:// or https://");

  e = parse_registry_url("http://bob:s3cret@/x");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message == "registry URL 'http:///x' has no host");

  e = parse_registry_url("http://bob:s3%zz@host");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message == "registry URL 'http://host': bad %-escape in its credentials");

  e = parse_registry_url("http://host:8081/ccompat?x=1");
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.error().message,
             StartsWith("registry URL 'http://host:8081/ccompat?x=1' has a query"));
}

TEST_CASE("parse_registry_auth: user and password, the password may hold ':'", "[registry]") {
  auto a = parse_registry_auth("alice:pa:ss");
  REQUIRE(a.ok());
  CHECK(a->user == "alice");
  CHECK(a->password == "pa:ss");
  auto e = parse_registry_auth("alice");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().status == ExitStatus::kUsage);
  CHECK(e.error().message == "registry credentials must be 'user:password'");
}

TEST_CASE("registry paths", "[registry]") {
  CHECK(schema_by_id_path(42) == "/schemas/ids/42");
  CHECK(subject_version_path("orders-value", -1) == "/subjects/orders-value/versions/latest");
  CHECK(subject_version_path("a/b", 3) == "/subjects/a%2Fb/versions/3");
  CHECK(subject_path("a b") == "/subjects/a%20b");
  CHECK(subject_versions_path("a b") == "/subjects/a%20b/versions");
}

// --- requests and answers ----------------------------------------------------------

TEST_CASE("schema_request_body: Avro without schemaType, others with it and references",
          "[registry]") {
  RegisteredSchema avro;
  avro.text = R"({"type":"record","name":"A","fields":[]})";
  CHECK(schema_request_body(avro) ==
        R"({"schema":"{\"type\":\"record\",\"name\":\"A\",\"fields\":[]}"})");

  RegisteredSchema proto;
  proto.type = SchemaType::kProtobuf;
  proto.text = "syntax = \"proto3\";\nimport \"money.proto\";\n";
  proto.references = {{"money.proto", "money-value", 2}, {"b.proto", "b", 1}};
  CHECK(schema_request_body(proto) ==
        R"({"schema":"syntax = \"proto3\";\nimport \"money.proto\";\n","schemaType":"PROTOBUF",)"
        R"("references":[{"name":"money.proto","subject":"money-value","version":2},)"
        R"({"name":"b.proto","subject":"b","version":1}]})");

  RegisteredSchema json;
  json.type = SchemaType::kJson;
  json.text = "{}";
  CHECK(schema_request_body(json) == R"({"schema":"{}","schemaType":"JSON"})");
}

TEST_CASE("parse_schema_answer: an id's answer, Avro when schemaType is absent", "[registry]") {
  // As Apicurio Registry 2.6 answers GET /schemas/ids/1.
  auto s = parse_schema_answer(
      R"({"schema":"{\"type\":\"record\",\"name\":\"Order\",\"fields\":[{\"name\":\"id\",\"type\":\"long\"}]}","references":[]})");
  REQUIRE(s.ok());
  CHECK(s->id == 0);
  CHECK(s->type == SchemaType::kAvro);
  CHECK(s->text == R"({"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]})");
  CHECK(s->references.empty());
}

TEST_CASE("parse_schema_answer: a version's answer, Protobuf with a reference", "[registry]") {
  auto s = parse_schema_answer(
      R"({"id":3,"subject":"orders proto","version":1,"schema":"syntax = \"proto3\";\npackage shop;\nimport \"money.proto\";\nmessage Order { string id = 1; shop.Money total = 2; }","schemaType":"PROTOBUF","references":[{"name":"money.proto","subject":"money.proto","version":1}]})");
  REQUIRE(s.ok());
  CHECK(s->id == 3);
  CHECK(s->type == SchemaType::kProtobuf);
  CHECK_THAT(s->text, StartsWith("syntax = \"proto3\";\npackage shop;\n"));
  REQUIRE(s->references.size() == 1);
  CHECK(s->references[0].name == "money.proto");
  CHECK(s->references[0].subject == "money.proto");
  CHECK(s->references[0].version == 1);

  auto j = parse_schema_answer(R"({"schema":"{}","schemaType":"JSON"})");
  REQUIRE(j.ok());
  CHECK(j->type == SchemaType::kJson);
}

TEST_CASE("parse_schema_answer: says what is wrong with an answer", "[registry]") {
  auto message = [](std::string_view body) {
    auto s = parse_schema_answer(body);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().status == ExitStatus::kFailure);
    return s.error().message;
  };
  CHECK(message("<html>") == "the answer is not JSON");
  CHECK(message("[]") == "the answer is not a JSON object");
  CHECK(message(R"({"id":1})") == "the answer has no string 'schema'");
  CHECK(message(R"({"schema":"x","schemaType":"XML"})") == "unknown schema type 'XML'");
  CHECK(message(R"({"schema":"x","references":[{"name":"a"}]})") ==
        "a reference of the answer has no string 'name' and 'subject'");
  CHECK(message(R"({"schema":"x","references":[{"name":"a","subject":"b"}]})") ==
        "reference 'a': the answer has no integer 'version'");
}

TEST_CASE("parse_id_answer: registration's and lookup's answers", "[registry]") {
  CHECK(*parse_id_answer(R"({"id":7})") == 7);
  CHECK(*parse_id_answer(R"({"id":1,"subject":"s","version":1,"schema":"{}","references":[]})") ==
        1);
  CHECK(parse_id_answer(R"({"id":"7"})").error().message == "the answer has no integer 'id'");
  CHECK(parse_id_answer(R"({"id":4294967296})").error().message ==
        "the answer's 'id' 4294967296 is out of range");
}

TEST_CASE("parse_error_answer: code and message, on one line", "[registry]") {
  auto e = parse_error_answer(R"({"error_code":40403,"message":"Schema not found.\n  really"})");
  CHECK(e.error_code == 40403);
  CHECK(e.message == "Schema not found. really");
  auto none = parse_error_answer("<html><body>Bad Gateway</body></html>");
  CHECK(none.error_code == 0);
  CHECK(none.message.empty());
}

// --- errors ----------------------------------------------------------------------

TEST_CASE("answer_error: an id the registry does not hold is the record's fault", "[registry]") {
  auto r = request(RegistryRequest::kById, "http://127.0.0.1:8081/apis/ccompat/v7/schemas/ids/42");
  r.id = 42;
  Error e = answer_error(r, 404, R"({"error_code":40403,"message":"Schema not found"})");
  CHECK(e.status == ExitStatus::kDataError);
  CHECK(e.message == "schema 42 is not in the registry at http://127.0.0.1:8081/apis/ccompat/v7");
}

TEST_CASE("answer_error: a 404 from a URL that is not the registry's API is a failure",
          "[registry]") {
  // Apicurio's answer to a path it does not serve (its base URL without
  // /apis/ccompat/v7): every record would otherwise be set aside.
  auto r = request(RegistryRequest::kById, "http://127.0.0.1:8081/schemas/ids/1");
  r.id = 1;
  Error e = answer_error(
      r, 404,
      R"({"error_code":404,"message":"RESTEASY003210: Could not find resource for full path: http://127.0.0.1:8081/schemas/ids/1"})");
  CHECK(e.status == ExitStatus::kFailure);
  CHECK(e.message ==
        "registry http://127.0.0.1:8081/schemas/ids/1: not found: is this the registry's "
        "Confluent-compatible API?: RESTEASY003210: Could not find resource for full path: "
        "http://127.0.0.1:8081/schemas/ids/1 (404)");
  CHECK(answer_error(r, 404, "<html>Not Found</html>").status == ExitStatus::kFailure);
}

TEST_CASE("answer_error: subjects and versions that are not there", "[registry]") {
  std::string url = std::string(kBase) + "/subjects/orders-value/versions/7";
  auto r = request(RegistryRequest::kVersion, url);
  r.subject = "orders-value";
  r.version = 7;
  Error e = answer_error(r, 404, R"({"error_code":40401,"message":"Subject not found."})");
  CHECK(e.status == ExitStatus::kFailure);
  CHECK(e.message == "registry " + url + ": subject 'orders-value' not found (404)");
  e = answer_error(r, 404, R"({"error_code":40402,"message":"Version not found."})");
  CHECK(e.message == "registry " + url + ": subject 'orders-value' has no version 7 (404)");

  url = std::string(kBase) + "/subjects/orders-value";
  auto lookup = request(RegistryRequest::kLookup, url);
  lookup.subject = "orders-value";
  e = answer_error(lookup, 404, R"({"error_code":40403,"message":"Schema not found"})");
  CHECK(e.status == ExitStatus::kFailure);
  CHECK(e.message ==
        "registry " + url + ": the schema is not registered under subject 'orders-value' (404)");
  e = answer_error(lookup, 404, R"({"error_code":40401,"message":"Subject not found"})");
  CHECK(e.message == "registry " + url +
                         ": the schema is not registered under subject 'orders-value': no such "
                         "subject (404)");
}

TEST_CASE("answer_error: quotes the registry on refusals and other errors", "[registry]") {
  std::string url = std::string(kBase) + "/subjects/orders-value/versions";
  auto r = request(RegistryRequest::kRegister, url);
  r.subject = "orders-value";
  Error e = answer_error(
      r, 409,
      R"({"error_code":409,"message":"Incompatible artifact: orders-value [AVRO]. Causes: x at /fields/1"})");
  CHECK(e.status == ExitStatus::kFailure);
  CHECK(e.message ==
        "registry " + url +
            ": subject 'orders-value' refuses the schema as incompatible: Incompatible "
            "artifact: orders-value [AVRO]. Causes: x at /fields/1 (409)");
  e = answer_error(r, 422, R"({"error_code":42201,"message":"Invalid schema"})");
  CHECK(e.message ==
        "registry " + url +
            ": subject 'orders-value' refuses the schema as invalid: Invalid schema (422)");
  e = answer_error(r, 500, R"({"error_code":50001,"message":"Error in the backend\ndata store."})");
  CHECK(e.message == "registry " + url + ": Error in the backend data store (500)");
  e = answer_error(r, 401, "");
  CHECK(e.message ==
        "registry " + url + ": not authorized: check the registry's credentials (401)");
  e = answer_error(r, 502, "<html>Bad Gateway</html>");
  CHECK(e.message == "registry " + url + ": unexpected answer (502)");
}

TEST_CASE("retry_backoff: 100 ms, doubling, at most 2 s", "[registry]") {
  CHECK(retry_backoff(1) == 100);
  CHECK(retry_backoff(2) == 200);
  CHECK(retry_backoff(3) == 400);
  CHECK(retry_backoff(5) == 1600);
  CHECK(retry_backoff(6) == 2000);
  CHECK(retry_backoff(1000) == 2000);
}

// --- the client, without a server ----------------------------------------------------

TEST_CASE("retry_wait: the attempts go on until --timeout, the last one at it", "[registry]") {
  CHECK(retry_wait(1, 5000) == 100);
  CHECK(retry_wait(5, 1500) == 1500);
  CHECK(retry_wait(6, 1500) == 1500);
  CHECK(retry_wait(3, 0) == 0);
  CHECK(retry_wait(3, -5) == 0);
  // Attempts that fail at once, under --timeout 3s: at 0, 0.1, 0.3, 0.7,
  // 1.5 and 3 s. The backoff alone gave up at 1.5 s ("retried for 1.5s").
  for (Millis timeout : {Millis{3000}, Millis{2500}, Millis{300}, Millis{30000}}) {
    Millis now = 0;
    std::vector<Millis> attempts{now};
    for (int attempt = 1; now < timeout; ++attempt) {
      now += retry_wait(attempt, timeout - now);
      attempts.push_back(now);
    }
    CHECK(attempts.back() == timeout);
    if (timeout == 3000) CHECK(attempts == std::vector<Millis>{0, 100, 300, 700, 1500, 3000});
  }
}

TEST_CASE("open_registry: an unreachable registry is retried for the whole timeout", "[registry]") {
  int port = closed_port();
  RegistryOptions o;
  o.url = fmt::format("http://127.0.0.1:{}", port);
  o.timeout = 1000;
  auto r = open_registry(o);
  REQUIRE(r.ok());
  auto start = std::chrono::steady_clock::now();
  auto s = (*r)->version("orders-value", -1);
  auto took = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        fmt::format("registry http://127.0.0.1:{}/subjects/orders-value/versions/latest: cannot "
                    "connect: Connection refused (retried for 1s)",
                    port));
  CHECK(took >= std::chrono::milliseconds(1000));
  CHECK(took < std::chrono::milliseconds(1500));
  // Out of reach is not "not found": registering would not help.
  CHECK_FALSE((*r)->last_not_found());
}

TEST_CASE("open_registry: refuses a URL that is not http(s)", "[registry]") {
  RegistryOptions o;
  o.url = "localhost:8081";
  auto r = open_registry(o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().status == ExitStatus::kUsage);
  o.url = "http://localhost:8081";
  o.auth = "alice";
  r = open_registry(o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().status == ExitStatus::kUsage);
  o.auth = "";
  o.ca_file = "/nonexistent/ca.pem";
  r = open_registry(o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message ==
        "cannot read CA file '/nonexistent/ca.pem': No such file or directory");
}

TEST_CASE("open_registry: describe() shows the URL without the password", "[registry]") {
  RegistryOptions o;
  o.url = "https://alice:s3cret@sr.example.com:8443/apis/ccompat/v7/";
  auto r = open_registry(o);
  REQUIRE(r.ok());
  CHECK((*r)->describe() == "https://sr.example.com:8443/apis/ccompat/v7");
  o.url = "https://sr.example.com:8443";
  o.auth = "alice:s3cret";
  r = open_registry(o);
  REQUIRE(r.ok());
  CHECK((*r)->describe() == "https://sr.example.com:8443");
}

TEST_CASE("open_registry: an unreachable registry fails within the timeout, naming the URL",
          "[registry]") {
  int port = closed_port();
  RegistryOptions o;
  o.url = fmt::format("http://alice:s3cret@127.0.0.1:{}/apis/ccompat/v7", port);
  o.timeout = 300;
  auto r = open_registry(o);
  REQUIRE(r.ok());
  auto start = std::chrono::steady_clock::now();
  auto s = (*r)->by_id(1);
  auto took = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(s.ok());
  // Not the record's fault: a program stops rather than set records aside.
  CHECK(s.error().status == ExitStatus::kFailure);
  CHECK_THAT(s.error().message,
             StartsWith(fmt::format("registry http://127.0.0.1:{}/apis/ccompat/v7/schemas/ids/1: "
                                    "cannot connect: Connection refused",
                                    port)));
  CHECK_THAT(s.error().message, !Contains("s3cret") && !Contains("alice"));
  // Retried for the whole timeout, and given up by it.
  CHECK(took >= std::chrono::milliseconds(300));
  CHECK(took < std::chrono::seconds(3));
  CHECK_THAT(s.error().message, Contains(" (retried for 300ms)"));
  CHECK_FALSE((*r)->last_not_found());

  RegisteredSchema schema;
  schema.text = "{}";
  auto id = (*r)->lookup("orders-value", schema, true);
  REQUIRE_FALSE(id.ok());
  CHECK_THAT(id.error().message,
             StartsWith(fmt::format("registry http://127.0.0.1:{}/apis/ccompat/v7/subjects/"
                                    "orders-value: cannot connect: Connection refused",
                                    port)));
}
