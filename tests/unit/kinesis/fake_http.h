// An HTTP transport that answers from a script and keeps what it was
// sent, for the Kinesis layer's tests: the credentials' chain (STS, the
// metadata service), the client's retries, the writer's batches.
#pragma once

#include <catch2/catch.hpp>

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "kpipe/json.h"
#include "kpipe/kinesis/http.h"

namespace kpipe {

// The API operation a request calls ("ListShards"): its X-Amz-Target's.
inline std::string amz_operation(const HttpRequest& r) {
  for (const auto& [k, v] : r.headers)
    if (k == "X-Amz-Target") return v.substr(v.find('.') + 1);
  return "";
}

// `"Records":[...]` as GetRecords and SubscribeToShard give them: each
// (sequence number, data), partition key "k", one arrival time.
inline std::string records_json(const std::vector<std::pair<std::string, std::string>>& seq_data) {
  std::string body = R"("Records":[)";
  for (size_t i = 0; i < seq_data.size(); ++i) {
    if (i > 0) body += ",";
    std::string data;
    append_base64(data, seq_data[i].second);
    body += R"({"SequenceNumber":")" + seq_data[i].first + R"(","Data":")" + data +
            R"(","PartitionKey":"k","ApproximateArrivalTimestamp":1764412345.0})";
  }
  return body + "]";
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
