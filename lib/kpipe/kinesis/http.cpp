#include "kpipe/kinesis/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>

#include <fmt/format.h>

namespace kpipe {

namespace {

size_t collect(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

struct SlistGuard {
  curl_slist* list = nullptr;
  ~SlistGuard() { curl_slist_free_all(list); }
  void add(const std::string& line) { list = curl_slist_append(list, line.c_str()); }
};

class CurlTransport final : public HttpTransport {
 public:
  CurlTransport(CURL* curl, CurlSettings settings) : curl_(curl), settings_(std::move(settings)) {}
  ~CurlTransport() override { curl_easy_cleanup(curl_); }
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  Expected<HttpResponse> send(const HttpRequest& request) override {
    // Each request sets everything it uses: the handle, and so its kept-alive
    // connection, serves all of them.
    curl_easy_reset(curl_);
    HttpResponse response;
    char error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(curl_, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(curl_, CURLOPT_USERAGENT, "kpipe/" KPIPE_VERSION);
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &response.body);
    // No SIGALRM for name lookups: programs have signal handlers of their own.
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::max<Millis>(request.timeout, 1)));
    if (!settings_.ca_file.empty())
      curl_easy_setopt(curl_, CURLOPT_CAINFO, settings_.ca_file.c_str());
    SlistGuard connect_to;
    for (const auto& c : settings_.connect_to) connect_to.add(c);
    if (connect_to.list != nullptr) curl_easy_setopt(curl_, CURLOPT_CONNECT_TO, connect_to.list);
    SlistGuard headers;
    for (const auto& [name, value] : request.headers) headers.add(name + ": " + value);
    // No "Expect: 100-continue" wait before a large body, where nothing is
    // signed: libcurl 7.88 signs a header removed so ("Expect:") as an
    // empty one it never sends, and the service would refuse the signature.
    if (request.credentials == nullptr) headers.add("Expect:");
    if (request.credentials != nullptr) {
      curl_easy_setopt(curl_, CURLOPT_AWS_SIGV4, request.sigv4_scope.c_str());
      curl_easy_setopt(curl_, CURLOPT_USERNAME, request.credentials->access_key_id.c_str());
      curl_easy_setopt(curl_, CURLOPT_PASSWORD, request.credentials->secret_access_key.c_str());
      if (!request.credentials->session_token.empty())
        headers.add("X-Amz-Security-Token: " + request.credentials->session_token);
    }
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers.list);
    if (request.method == "POST" || request.method == "PUT") {
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, request.body.data());
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
      if (request.method == "PUT") curl_easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, "PUT");
    } else if (request.method != "GET") {
      curl_easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
    CURLcode code = curl_easy_perform(curl_);
    if (code != CURLE_OK) {
      std::string why = error[0] != '\0' ? error : curl_easy_strerror(code);
      return failure("{}", why);
    }
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &response.status);
    return response;
  }

 private:
  CURL* curl_;
  CurlSettings settings_;
};

}  // namespace

std::unique_ptr<HttpTransport> make_curl_transport(const CurlSettings& settings) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return nullptr;
  return std::make_unique<CurlTransport>(curl, settings);
}

}  // namespace kpipe
