#include "kpipe/kinesis/kinesis_client.h"

#include <simdjson.h>

#include <algorithm>

namespace kpipe {

namespace {

// The SDKs' backoff: a base of 100 ms doubled each attempt, up to 5 s, and
// a random part of it ("full jitter"), so that many clients throttled at
// once do not come back at once.
constexpr Millis kBackoffBase = 100;
constexpr Millis kBackoffCap = 5 * kSecond;
// Temporary credentials are renewed this long before they expire.
constexpr Millis kRenewBefore = 5 * 60 * kSecond;

}  // namespace

KinesisError parse_kinesis_error(std::string_view body) {
  KinesisError e;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (body.empty() || parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS)
    return e;
  std::string_view v;
  if (doc["__type"].get(v) == simdjson::SUCCESS) {
    auto hash = v.rfind('#');
    e.type = std::string(hash == std::string_view::npos ? v : v.substr(hash + 1));
  }
  // The service says "message"; some answers "Message".
  if (doc["message"].get(v) == simdjson::SUCCESS || doc["Message"].get(v) == simdjson::SUCCESS)
    e.message = std::string(v);
  return e;
}

bool is_retriable(long status, const KinesisError& error) {
  if (error.type == "ProvisionedThroughputExceededException" ||
      error.type == "LimitExceededException" || error.type == "ThrottlingException" ||
      error.type == "InternalFailure" || error.type == "ServiceUnavailable")
    return true;
  if (status >= 500) return !error.type.empty() || status != 500;
  return status == 429;
}

KinesisClient::KinesisClient(AwsSettings settings, CredentialSource credentials,
                             HttpTransport& http, Clock& clock, Millis timeout)
    : settings_(std::move(settings)),
      source_(std::move(credentials)),
      http_(http),
      clock_(clock),
      timeout_(timeout),
      scope_("aws:amz:" + settings_.region + ":kinesis") {}

Status KinesisClient::refresh_credentials() {
  if (have_credentials_ &&
      (credentials_.expires == 0 || clock_.now() < credentials_.expires - kRenewBefore))
    return {};
  auto c = source_();
  if (!c) return c.take_error();
  credentials_ = std::move(*c);
  have_credentials_ = true;
  return {};
}

Expected<HttpRequest> KinesisClient::request(std::string_view operation, std::string_view body) {
  KPIPE_TRY(refresh_credentials());
  HttpRequest request;
  request.method = "POST";
  request.url = settings_.endpoint + "/";
  request.headers = {{"Content-Type", "application/x-amz-json-1.1"},
                     {"X-Amz-Target", "Kinesis_20131202." + std::string(operation)}};
  request.body = std::string(body);
  request.credentials = &credentials_;
  request.sigv4_scope = scope_;
  request.timeout = timeout_;
  return request;
}

Expected<std::string> KinesisClient::call(std::string_view operation, std::string_view body) {
  auto made = request(operation, body);
  if (!made) return made.take_error();
  HttpRequest& request = *made;
  Millis deadline = clock_.steady() + timeout_;
  std::string last;
  for (int attempt = 0;; ++attempt) {
    request.timeout = std::max<Millis>(deadline - clock_.steady(), 1);
    auto answer = http_.send(request);
    if (answer && answer->status == 200) return std::move(answer->body);
    last_status_ = answer ? answer->status : 0;
    last_error_ = answer ? parse_kinesis_error(answer->body) : KinesisError{};
    if (answer) {
      const KinesisError& e = last_error_;
      last = e.type.empty()
                 ? fmt::format("HTTP {}", answer->status)
                 : fmt::format("{}{}", e.type, e.message.empty() ? "" : ": " + e.message);
      if (!is_retriable(answer->status, e)) return failure("kinesis {}: {}", operation, last);
    } else {
      last = answer.error().message;
    }
    Millis step = std::min<Millis>(kBackoffCap, kBackoffBase << std::min(attempt, 10));
    jitter_ ^= jitter_ << 13;
    jitter_ ^= jitter_ >> 7;
    jitter_ ^= jitter_ << 17;
    Millis pause = static_cast<Millis>(jitter_ % static_cast<uint64_t>(step + 1));
    if (clock_.steady() + pause >= deadline)
      return failure("kinesis {}: no answer from {} within {}: {}", operation, settings_.endpoint,
                     format_duration(timeout_), last);
    ++retries_;
    clock_.sleep_for(pause);
  }
}

}  // namespace kpipe
