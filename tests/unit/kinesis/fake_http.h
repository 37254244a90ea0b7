// An HTTP transport that answers from a script and keeps what it was
// sent, for the Kinesis layer's tests: the credentials' chain (STS, the
// metadata service), the client's retries, the writer's batches.
#pragma once

#include <catch2/catch.hpp>

#include <deque>
#include <string>
#include <vector>

#include "kpipe/kinesis/http.h"

namespace kpipe {

// The API operation a request calls ("ListShards"): its X-Amz-Target's.
inline std::string amz_operation(const HttpRequest& r) {
  for (const auto& [k, v] : r.headers)
    if (k == "X-Amz-Target") return v.substr(v.find('.') + 1);
  return "";
}

class FakeHttp final : public HttpTransport {
 public:
  struct Answer {
    Answer(Expected<HttpResponse> r) : response(std::move(r)) {}  // NOLINT: any URL
    Answer(HttpResponse r) : response(std::move(r)) {}            // NOLINT: any URL
    Answer(std::string u, Expected<HttpResponse> r) : url(std::move(u)), response(std::move(r)) {}
    Answer(std::string u, HttpResponse r) : url(std::move(u)), response(std::move(r)) {}
    std::string url;  // the request's URL it answers; "" any
    Expected<HttpResponse> response;
  };

  Expected<HttpResponse> send(const HttpRequest& request) override {
    sent.push_back(request);
    if (request.credentials != nullptr) signed_with.push_back(request.credentials->access_key_id);
    if (answers.empty()) return fallback;
    Answer a = std::move(answers.front());
    answers.pop_front();
    if (!a.url.empty()) CHECK(request.url == a.url);
    return a.response;
  }

  std::deque<Answer> answers;
  // What it answers once the script has run out.
  Expected<HttpResponse> fallback = failure("Connection refused");
  std::vector<HttpRequest> sent;
  std::vector<std::string> signed_with;
};

}  // namespace kpipe
