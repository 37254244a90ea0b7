// The Kinesis Data Streams API (JSON 1.1 over HTTPS, signed with SigV4):
// one call at a time over one kept-alive connection, retried the way the
// SDKs retry. The reader and writer of a stream (the log interface,
// kpipe/log.h) are built on it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "kpipe/kinesis/aws_config.h"
#include "kpipe/kinesis/http.h"
#include "kpipe/report.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// What the service said of a call it refused: its exception's name (the
// part of "__type" after any '#') and message.
struct KinesisError {
  std::string type;
  std::string message;
};
KinesisError parse_kinesis_error(std::string_view body);

// Whether a call that failed so may pass if made again: the service's
// throttling (ProvisionedThroughputExceededException, LimitExceededException,
// ThrottlingException), its 5xx answers (kinesis-mock answers a bad
// iterator with HTTP 500 and no body: that one is not retried here, since
// the caller must renew the iterator).
bool is_retriable(long status, const KinesisError& error);

// Where the credentials come from, asked again when they are about to
// expire (web identity and instance roles give temporary ones).
using CredentialSource = std::function<Expected<AwsCredentials>()>;

class KinesisClient {
 public:
  KinesisClient(AwsSettings settings, CredentialSource credentials, HttpTransport& http,
                Clock& clock, Millis timeout);

  // One call (`operation`: "ListShards", "GetRecords", ...) with a JSON
  // body; the answer's JSON. Throttling, 5xx answers and connection errors
  // are retried with jittered exponential backoff until the timeout, then
  // one error naming the operation, the endpoint and the last reason. An
  // answer the service gives for good (ResourceNotFoundException, ...) is
  // an error at once, its type first: "ResourceNotFoundException: ...".
  Expected<std::string> call(std::string_view operation, std::string_view body);

  // The request call() sends for `operation`, signed, for a caller that
  // sends it its own way (SubscribeToShard's stream): the credentials are
  // renewed first when about to expire. It points at them: valid until
  // the next request.
  Expected<HttpRequest> request(std::string_view operation, std::string_view body);

  const AwsSettings& settings() const { return settings_; }
  // What the service answered the last call that failed: its HTTP status
  // (0: no answer) and its exception, for a caller that recovers from some
  // (an expired iterator is asked for again).
  long last_status() const { return last_status_; }
  const KinesisError& last_error() const { return last_error_; }
  // Calls retried since the start, for tests and --stats.
  uint64_t retries() const { return retries_; }

 private:
  Status refresh_credentials();

  AwsSettings settings_;
  CredentialSource source_;
  HttpTransport& http_;
  Clock& clock_;
  Millis timeout_;
  std::string scope_;
  AwsCredentials credentials_;
  bool have_credentials_ = false;
  uint64_t retries_ = 0;
  long last_status_ = 0;
  KinesisError last_error_;
  uint64_t jitter_ = 0x9e3779b97f4a7c15ULL;  // xorshift state: no global RNG
};

}  // namespace kpipe
