// HTTP as the Kinesis layer speaks it: one request and its answer, behind
// an interface, so that the credentials' chain and the client's retries
// are tested against a fake, and libcurl (the one transport here) keeps
// one connection alive per program and signs requests with AWS Signature
// Version 4 itself (CURLOPT_AWS_SIGV4): no signing code of kpipe's own.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: long-term keys
  // Where they came from, for -v ("environment", "profile 'x'", ...).
  std::string source;
  // When temporary credentials expire (epoch ms); 0: they do not.
  Millis expires = 0;
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  Millis timeout = 10 * kSecond;
  // Signed with these for `sigv4_scope` ("aws:amz:REGION:SERVICE") when
  // given; the session token then goes as X-Amz-Security-Token.
  const AwsCredentials* credentials = nullptr;
  std::string sigv4_scope;
};

struct HttpResponse {
  long status = 0;
  std::string body;
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // An answer of any status; an error only when none came (the host could
  // not be reached, the connection broke, the time ran out), saying why.
  virtual Expected<HttpResponse> send(const HttpRequest& request) = 0;
};

struct CurlSettings {
  std::string ca_file;  // empty: the system's CAs
  // libcurl's CURLOPT_CONNECT_TO entries ("HOST:PORT:CONNECT-HOST:CONNECT-PORT"):
  // a request for HOST:PORT goes to the other address, its Host header
  // (and so its signature) unchanged. For tests.
  std::vector<std::string> connect_to;
};

std::unique_ptr<HttpTransport> make_curl_transport(const CurlSettings& settings = {});

// Requests whose answers are long streams, many at once over one
// connection (HTTP/2, multiplexed): enhanced fan-out's SubscribeToShard,
// one a shard. Behind an interface, so that the subscriptions' state
// machine is tested against a script.
class StreamingTransport {
 public:
  using Id = uint64_t;
  struct Piece {
    Id id = 0;
    long status = 0;    // the answer's HTTP status, once its headers came
    std::string data;   // bytes of its body, as they came
    bool done = false;  // the answer ended, or none came (`error` says why)
    std::string error;
  };
  virtual ~StreamingTransport() = default;
  // Starts a request; its answer comes in pieces through wait(). Its
  // `timeout` bounds the connection's making, not the answer's length.
  virtual Expected<Id> start(const HttpRequest& request) = 0;
  // Ends a request not yet done: nothing more of it comes.
  virtual void cancel(Id id) = 0;
  // Waits up to `wait` for bytes of any request, or its end, then appends
  // what came to `out` (nothing, when nothing did).
  virtual Status wait(Millis wait, std::vector<Piece>& out) = 0;
};

// libcurl's multi interface: every request a stream of one HTTP/2
// connection. Over https (AWS) HTTP/2 is agreed by ALPN; over plain http
// (kinesis-mock's port) it is spoken at once (h2c with prior knowledge):
// SubscribeToShard is HTTP/2's alone at AWS (kinesis-mock also streams it
// over HTTP/1.1, chunked, a connection a shard). libcurl before 8.0.0
// cannot reuse a prior-knowledge connection: over plain http each request
// then has a connection of its own (still HTTP/2).
std::unique_ptr<StreamingTransport> make_curl_streaming(const CurlSettings& settings = {});

}  // namespace kpipe
