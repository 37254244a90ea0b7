#include "kpipe/schema/registry.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <simdjson.h>

#include "kpipe/json.h"
#include "kpipe/percent.h"
#include "kpipe/schema/registry_http.h"

namespace kpipe {

std::string_view schema_type_name(SchemaType type) {
  switch (type) {
    case SchemaType::kProtobuf:
      return "PROTOBUF";
    case SchemaType::kJson:
      return "JSON";
    default:
      return "AVRO";
  }
}

// --- URLs, requests and answers ---------------------------------------------------

namespace {

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i])) != prefix[i]) return false;
  return true;
}

// Where the authority ends: the first '/', '?' or '#' after it.
size_t authority_end(std::string_view url, size_t start) {
  size_t end = url.find_first_of("/?#", start);
  return end == std::string_view::npos ? url.size() : end;
}

// The '@' that ends the user info, or npos: the authority's last. A
// password holding a '/' that is not percent-encoded ("user:pa/ss@host")
// ends the authority early; its '@' is then the URL's last, where a ':'
// that starts no port comes before the first '/' ("host:8081/a@b" has
// no user info).
size_t userinfo_end(std::string_view url, size_t start) {
  size_t end = authority_end(url, start);
  size_t at = url.substr(start, end - start).rfind('@');
  if (at != std::string_view::npos) return start + at;
  size_t last = url.rfind('@');
  size_t colon = url.find(':', start);
  if (last == std::string_view::npos || last < end || colon >= end) return std::string_view::npos;
  std::string_view port = url.substr(colon + 1, end - colon - 1);
  if (port.find_first_not_of("0123456789") == std::string_view::npos) return std::string_view::npos;
  return last;
}

// Registries' messages may span lines (a schema parser's) and end in a
// period; a diagnostic is one line without one.
std::string one_line(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

}  // namespace

std::string redact_url(std::string_view url) {
  size_t scheme = url.find("://");
  size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
  size_t at = userinfo_end(url, start);
  if (at == std::string_view::npos) return std::string(url);
  return std::string(url.substr(0, start)) + std::string(url.substr(at + 1));
}

Expected<RegistryUrl> parse_registry_url(std::string_view url) {
  std::string scheme;
  if (starts_with_nocase(url, "http://")) {
    scheme = "http://";
  } else if (starts_with_nocase(url, "https://")) {
    scheme = "https://";
  } else if (url.find("://") == std::string_view::npos) {
    return usage_error("registry URL '{}' has no http:// or https://", redact_url(url));
  } else {
    return usage_error("registry URL '{}' is not http:// or https://", redact_url(url));
  }
  size_t start = scheme.size();
  size_t at = userinfo_end(url, start);
  size_t host = at == std::string_view::npos ? start : at + 1;
  size_t end = authority_end(url, host);
  std::string_view authority = url.substr(host, end - host);
  std::string_view rest = url.substr(end);
  RegistryUrl out;
  if (at != std::string_view::npos) {
    std::string_view info = url.substr(start, at - start);
    size_t colon = info.find(':');
    if (!percent_decode(info.substr(0, colon), out.user) ||
        (colon != std::string_view::npos && !percent_decode(info.substr(colon + 1), out.password)))
      return usage_error("registry URL '{}{}': bad %-escape in its credentials", scheme, authority);
    out.has_credentials = true;
  }
  if (authority.empty()) return usage_error("registry URL '{}' has no host", redact_url(url));
  if (rest.find_first_of("?#") != std::string_view::npos)
    return usage_error("registry URL '{}' has a query or fragment: give the base URL only",
                       redact_url(url));
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  out.base = scheme;
  out.base += authority;
  out.base += rest;
  return out;
}

Expected<RegistryCredentials> parse_registry_auth(std::string_view auth) {
  size_t colon = auth.find(':');
  if (colon == std::string_view::npos || colon == 0)
    return usage_error("registry credentials must be 'user:password'");
  return RegistryCredentials{std::string(auth.substr(0, colon)),
                             std::string(auth.substr(colon + 1))};
}

std::string schema_by_id_path(int32_t id) {
  return fmt::format("/schemas/ids/{}", id);
}

std::string subject_path(std::string_view subject) {
  // A subject may hold any character: one path segment, escaped.
  return "/subjects/" + percent_encode(subject);
}

std::string subject_versions_path(std::string_view subject) {
  return subject_path(subject) + "/versions";
}

std::string subject_version_path(std::string_view subject, int32_t version) {
  std::string path = subject_versions_path(subject) + "/";
  if (version == -1) return path + "latest";
  return path + std::to_string(version);
}

std::string schema_request_body(const RegisteredSchema& schema) {
  std::string out = "{\"schema\":";
  append_json_string(out, schema.text);
  if (schema.type != SchemaType::kAvro) {
    out += ",\"schemaType\":";
    append_json_string(out, schema_type_name(schema.type));
  }
  if (!schema.references.empty()) {
    out += ",\"references\":[";
    for (size_t i = 0; i < schema.references.size(); ++i) {
      const SchemaReference& r = schema.references[i];
      if (i > 0) out.push_back(',');
      out += "{\"name\":";
      append_json_string(out, r.name);
      out += ",\"subject\":";
      append_json_string(out, r.subject);
      out += ",\"version\":";
      append_int(out, r.version);
      out.push_back('}');
    }
    out.push_back(']');
  }
  out.push_back('}');
  return out;
}

Expected<SchemaType> parse_schema_type(std::string_view name) {
  if (name == "AVRO") return SchemaType::kAvro;
  if (name == "PROTOBUF") return SchemaType::kProtobuf;
  if (name == "JSON") return SchemaType::kJson;
  return failure("unknown schema type '{}'", name);
}

namespace {

Expected<simdjson::dom::element> parse_object(simdjson::dom::parser& parser,
                                              std::string_view body) {
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS)
    return failure("the answer is not JSON");
  if (!doc.is_object()) return failure("the answer is not a JSON object");
  return doc;
}

// An int32 member; `name` in messages.
Expected<int32_t> int32_member(simdjson::dom::element object, const char* name) {
  int64_t v = 0;
  if (object[name].get_int64().get(v) != simdjson::SUCCESS)
    return failure("the answer has no integer '{}'", name);
  if (v < INT32_MIN || v > INT32_MAX)
    return failure("the answer's '{}' {} is out of range", name, v);
  return static_cast<int32_t>(v);
}

}  // namespace

Expected<RegisteredSchema> parse_schema_answer(std::string_view body) {
  simdjson::dom::parser parser;
  auto doc = parse_object(parser, body);
  if (!doc) return doc.take_error();
  RegisteredSchema out;
  std::string_view text;
  if ((*doc)["schema"].get_string().get(text) != simdjson::SUCCESS)
    return failure("the answer has no string 'schema'");
  out.text = text;
  simdjson::dom::element member;
  if ((*doc)["schemaType"].get(member) == simdjson::SUCCESS && !member.is_null()) {
    std::string_view type;
    if (member.get_string().get(type) != simdjson::SUCCESS)
      return failure("the answer's 'schemaType' is not a string");
    auto parsed = parse_schema_type(type);
    if (!parsed) return parsed.take_error();
    out.type = *parsed;
  }
  // Present in an answer for a subject's version, not for an id.
  if ((*doc)["id"].get(member) == simdjson::SUCCESS) {
    auto id = int32_member(*doc, "id");
    if (!id) return id.take_error();
    out.id = *id;
  }
  if ((*doc)["references"].get(member) == simdjson::SUCCESS && !member.is_null()) {
    simdjson::dom::array refs;
    if (member.get_array().get(refs) != simdjson::SUCCESS)
      return failure("the answer's 'references' is not an array");
    for (simdjson::dom::element ref : refs) {
      SchemaReference r;
      std::string_view name;
      std::string_view subject;
      if (!ref.is_object() || ref["name"].get_string().get(name) != simdjson::SUCCESS ||
          ref["subject"].get_string().get(subject) != simdjson::SUCCESS)
        return failure("a reference of the answer has no string 'name' and 'subject'");
      auto version = int32_member(ref, "version");
      if (!version) return failure("reference '{}': {}", name, version.error().message);
      r.name = name;
      r.subject = subject;
      r.version = *version;
      out.references.push_back(std::move(r));
    }
  }
  return out;
}

Expected<int32_t> parse_id_answer(std::string_view body) {
  simdjson::dom::parser parser;
  auto doc = parse_object(parser, body);
  if (!doc) return doc.take_error();
  return int32_member(*doc, "id");
}

RegistryErrorAnswer parse_error_answer(std::string_view body) {
  RegistryErrorAnswer out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return out;
  int64_t code = 0;
  if (doc["error_code"].get_int64().get(code) == simdjson::SUCCESS) out.error_code = code;
  std::string_view message;
  if (doc["message"].get_string().get(message) == simdjson::SUCCESS)
    out.message = one_line(message);
  return out;
}

Error answer_error(const RegistryRequest& request, long status, std::string_view body) {
  RegistryErrorAnswer answer = parse_error_answer(body);
  auto fail = [&](std::string_view what) {
    return failure("registry {}: {} ({})", request.url, what, status);
  };
  // The registry's own words, when it gave some.
  auto quoting = [&](std::string_view what) {
    if (answer.message.empty()) return fail(what);
    return fail(fmt::format("{}: {}", what, answer.message));
  };
  std::string subject = fmt::format("subject '{}'", request.subject);
  if (status == 404) {
    switch (answer.error_code) {
      case kSchemaNotFound:
        if (request.kind == RegistryRequest::kById)
          return data_error("schema {} is not in the registry at {}", request.id, request.base);
        if (request.kind == RegistryRequest::kLookup)
          return fail(fmt::format("the schema is not registered under {}", subject));
        break;
      case kSubjectNotFound:
        if (request.kind == RegistryRequest::kLookup)
          return fail(
              fmt::format("the schema is not registered under {}: no such subject", subject));
        if (request.kind != RegistryRequest::kById) return fail(subject + " not found");
        break;
      case kVersionNotFound:
        if (request.kind == RegistryRequest::kVersion)
          return fail(fmt::format("{} has no version {}", subject, request.version));
        break;
      default:
        break;
    }
    return quoting("not found: is this the registry's Confluent-compatible API?");
  }
  if (status == 401) return quoting("not authorized: check the registry's credentials");
  if (status == 403) return quoting("access denied");
  if (status == 409 && request.kind == RegistryRequest::kRegister)
    return quoting(fmt::format("{} refuses the schema as incompatible", subject));
  if (status == 422 && request.kind == RegistryRequest::kRegister)
    return quoting(fmt::format("{} refuses the schema as invalid", subject));
  if (!answer.message.empty()) return fail(answer.message);
  return fail("unexpected answer");
}

Millis retry_backoff(int attempt) {
  constexpr Millis kFirst = 100;
  constexpr Millis kMost = 2 * kSecond;
  Millis wait = kFirst;
  for (int i = 1; i < attempt && wait < kMost; ++i) wait *= 2;
  return std::min(wait, kMost);
}

Millis retry_wait(int attempt, Millis left) {
  return std::clamp<Millis>(retry_backoff(attempt), 0, std::max<Millis>(left, 0));
}

// --- the client ---------------------------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;

CURLcode global_init() {
  static std::once_flag once;
  static CURLcode code = CURLE_OK;
  std::call_once(once, [] { code = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return code;
}

size_t collect(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// Errors of reaching the registry, not of its answer: a registry that is
// starting, restarting or behind a busy network answers a moment later.
bool transient(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
      return true;
    default:
      return false;
  }
}

// Gateways say so when the registry behind them is not there (yet).
bool transient_status(long status) {
  return status == 502 || status == 503 || status == 504;
}

class HttpRegistry final : public SchemaRegistry {
 public:
  HttpRegistry(CURL* curl, RegistryUrl url, RegistryCredentials credentials,
               const RegistryOptions& options)
      : curl_(curl),
        url_(std::move(url)),
        password_(credentials.password),
        timeout_(options.timeout) {
    headers_ = curl_slist_append(headers_, "Content-Type: application/vnd.schemaregistry.v1+json");
    headers_ = curl_slist_append(
        headers_, "Accept: application/vnd.schemaregistry.v1+json, application/json");
    // No "Expect: 100-continue" wait before a large schema's body.
    headers_ = curl_slist_append(headers_, "Expect:");
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
    curl_easy_setopt(curl_, CURLOPT_USERAGENT, "kpipe/" KPIPE_VERSION);
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, error_buffer_);
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &body_);
    // No SIGALRM for name lookups: programs have signal handlers of their own.
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(curl_, CURLOPT_ACCEPT_ENCODING, "");
    // A subject of dots stays a subject, not "..".
    curl_easy_setopt(curl_, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http,https");
    if (!credentials.user.empty()) {
      curl_easy_setopt(curl_, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
      curl_easy_setopt(curl_, CURLOPT_USERNAME, credentials.user.c_str());
      curl_easy_setopt(curl_, CURLOPT_PASSWORD, credentials.password.c_str());
    }
    if (!options.ca_file.empty()) curl_easy_setopt(curl_, CURLOPT_CAINFO, options.ca_file.c_str());
  }

  ~HttpRegistry() override {
    curl_easy_cleanup(curl_);
    curl_slist_free_all(headers_);
  }
  HttpRegistry(const HttpRegistry&) = delete;
  HttpRegistry& operator=(const HttpRegistry&) = delete;

  Expected<RegisteredSchema> by_id(int32_t id) override {
    std::lock_guard lock(mutex_);
    auto cached = by_id_.find(id);
    if (cached != by_id_.end()) return cached->second;
    RegistryRequest request;
    request.kind = RegistryRequest::kById;
    request.id = id;
    auto answer = call(request, schema_by_id_path(id), nullptr);
    if (!answer) return answer.take_error();
    auto schema = parse_schema_answer(*answer);
    if (!schema) return bad_answer(request, schema.error());
    schema->id = id;
    by_id_.emplace(id, *schema);
    return schema;
  }

  Expected<RegisteredSchema> version(std::string_view subject, int32_t version) override {
    std::lock_guard lock(mutex_);
    // A numbered version never changes; "latest" does.
    std::pair<std::string, int32_t> key(subject, version);
    if (version >= 1) {
      auto cached = versions_.find(key);
      if (cached != versions_.end()) return cached->second;
    }
    RegistryRequest request;
    request.kind = RegistryRequest::kVersion;
    request.subject = subject;
    request.version = version;
    auto answer = call(request, subject_version_path(subject, version), nullptr);
    if (!answer) return answer.take_error();
    auto schema = parse_schema_answer(*answer);
    if (!schema) return bad_answer(request, schema.error());
    if (schema->id == 0) return bad_answer(request, failure("the answer has no integer 'id'"));
    if (version >= 1) versions_.emplace(std::move(key), *schema);
    by_id_.emplace(schema->id, *schema);
    return schema;
  }

  Expected<int32_t> lookup(std::string_view subject, const RegisteredSchema& schema,
                           bool register_new) override {
    std::lock_guard lock(mutex_);
    std::string body = schema_request_body(schema);
    RegistryRequest request;
    request.kind = RegistryRequest::kLookup;
    request.subject = subject;
    // Registration first looks the schema up: registries differ in
    // whether registering it again adds a version.
    auto answer =
        call(request, subject_path(subject), &body, register_new ? not_registered : nullptr);
    if (!answer) return answer.take_error();
    if (status_ != 200) {
      request.kind = RegistryRequest::kRegister;
      answer = call(request, subject_versions_path(subject), &body);
      if (!answer) return answer.take_error();
    }
    auto id = parse_id_answer(*answer);
    if (!id) return bad_answer(request, id.error());
    return id;
  }

  std::string describe() const override { return url_.base; }
  bool last_not_found() const override { return not_found_; }

 private:
  // Whether an answer says that the schema is not under the subject.
  static bool not_registered(long status, std::string_view body) {
    if (status != 404) return false;
    int64_t code = parse_error_answer(body).error_code;
    return code == kSchemaNotFound || code == kSubjectNotFound;
  }

  // The answer's body when the registry answered 200, or when `expected`
  // takes the error answer it gave (status_ tells which). Retries what may
  // pass (no connection, a gateway's 503) until the timeout.
  Expected<std::string> call(RegistryRequest& request, const std::string& path,
                             const std::string* post,
                             bool (*expected)(long, std::string_view) = nullptr) {
    url_buffer_ = url_.base + path;
    request.base = url_.base;
    request.url = url_buffer_;
    curl_easy_setopt(curl_, CURLOPT_URL, url_buffer_.c_str());
    if (post != nullptr) {
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, post->data());
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(post->size()));
    } else {
      curl_easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
    }
    auto start = Clock::now();
    auto deadline = start + std::chrono::milliseconds(timeout_);
    not_found_ = false;
    auto error_of = [&](CURLcode code, long status) {
      if (code == CURLE_OK) return answer_error(request, status, body_);
      return failure("registry {}: {}", request.url, transport_error(code));
    };
    // Why the registry was out of reach, from the last attempt that had
    // time to find out.
    std::optional<Error> last;
    for (int attempt = 1;; ++attempt) {
      // Each attempt within what is left, at least a millisecond (0 is no limit).
      curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS,
                       static_cast<long>(std::max<Millis>(left(deadline), 1)));
      body_.clear();
      error_buffer_[0] = '\0';
      CURLcode code = curl_easy_perform(curl_);
      long status = 0;
      if (code == CURLE_OK) {
        curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status);
        status_ = status;
        if (status == 200 || (expected != nullptr && expected(status, body_)))
          return std::move(body_);
      }
      bool again = code == CURLE_OK ? transient_status(status) : transient(code);
      Millis remaining = left(deadline);
      if (!again || remaining <= 0) {
        if (code == CURLE_OK) {
          int64_t answer = parse_error_answer(body_).error_code;
          not_found_ = status == 404 && (answer == kSubjectNotFound || answer == kVersionNotFound ||
                                         answer == kSchemaNotFound);
        }
        // The attempt made at the deadline itself may only time out: the
        // error is the one that kept the registry out of reach until then.
        bool late = code == CURLE_OPERATION_TIMEDOUT && last.has_value();
        Error error = late ? std::move(*last) : error_of(code, status);
        // Retried until the deadline: for the whole --timeout, as it says
        // (the time measured runs a few ms past it).
        if (attempt > 1 && (code != CURLE_OPERATION_TIMEDOUT || late))
          error.message +=
              remaining <= 0
                  ? fmt::format(" (retried for {})", format_duration(timeout_))
                  : fmt::format(" (retried for {:.1f}s)",
                                std::chrono::duration<double>(Clock::now() - start).count());
        return error;
      }
      if (code != CURLE_OPERATION_TIMEDOUT) last = error_of(code, status);
      std::this_thread::sleep_for(std::chrono::milliseconds(retry_wait(attempt, remaining)));
    }
  }

  // Rounded up: a wait of what is left ends at the deadline, not before.
  static Millis left(Clock::time_point deadline) {
    return std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  }

  std::string transport_error(CURLcode code) {
    long os_errno = 0;
    curl_easy_getinfo(curl_, CURLINFO_OS_ERRNO, &os_errno);
    if (code == CURLE_COULDNT_CONNECT && os_errno != 0)
      return fmt::format("cannot connect: {}", std::strerror(static_cast<int>(os_errno)));
    if (code == CURLE_OPERATION_TIMEDOUT)
      return fmt::format("no answer within {}", format_duration(timeout_));
    std::string detail =
        curl_message(error_buffer_[0] != '\0' ? error_buffer_ : curl_easy_strerror(code));
    if (transient(code)) return "cannot connect: " + detail;
    return detail;
  }

  // libcurl's message, one line, never with the password: libcurl holds it
  // (CURLOPT_PASSWORD), and may quote what it was given. A password
  // shorter than 4 bytes is left: hiding it everywhere would blot out the
  // message's own words, and with them what the password is made of.
  std::string curl_message(std::string_view text) const {
    std::string out = one_line(text);
    if (password_.size() < 4) return out;
    for (size_t at = out.find(password_); at != std::string::npos; at = out.find(password_, at + 3))
      out.replace(at, password_.size(), "***");
    return out;
  }

  static Error bad_answer(const RegistryRequest& request, const Error& why) {
    return failure("registry {}: unexpected answer: {}", request.url, why.message);
  }

  CURL* curl_;
  curl_slist* headers_ = nullptr;
  RegistryUrl url_;
  std::string password_;  // only to keep it out of libcurl's messages
  Millis timeout_;
  std::string body_;
  std::string url_buffer_;  // the request's, which RegistryRequest::url views
  long status_ = 0;         // of the last answer
  bool not_found_ = false;  // last_not_found()
  char error_buffer_[CURL_ERROR_SIZE] = {};
  // One handle, one request at a time; the caches with it.
  std::mutex mutex_;
  std::map<int32_t, RegisteredSchema> by_id_;
  std::map<std::pair<std::string, int32_t>, RegisteredSchema> versions_;
};

}  // namespace

Expected<std::unique_ptr<SchemaRegistry>> open_registry(const RegistryOptions& options) {
  auto url = parse_registry_url(options.url);
  if (!url) return url.take_error();
  RegistryCredentials credentials{url->user, url->password};
  if (!options.auth.empty()) {
    auto auth = parse_registry_auth(options.auth);
    if (!auth) return auth.take_error();
    credentials = std::move(*auth);
  }
  if (options.timeout <= 0)
    return usage_error("the registry's timeout must be positive, not {}", options.timeout);
  if (!options.ca_file.empty() && ::access(options.ca_file.c_str(), R_OK) != 0)
    return usage_error("cannot read CA file '{}': {}", options.ca_file, std::strerror(errno));
  if (CURLcode code = global_init(); code != CURLE_OK)
    return failure("cannot initialise libcurl: {}", curl_easy_strerror(code));
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return failure("cannot initialise libcurl");
  return std::unique_ptr<SchemaRegistry>(
      new HttpRegistry(curl, std::move(*url), std::move(credentials), options));
}

}  // namespace kpipe
