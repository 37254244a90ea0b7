#include "kpipe/kinesis/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <map>
#include <memory>
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

// What a request sets on its handle, whichever transport sends it: the
// URL, the headers, the body and the signature. The lists must outlive
// the transfer.
void set_request(CURL* curl, const HttpRequest& request, const CurlSettings& settings,
                 SlistGuard& connect_to, SlistGuard& headers) {
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "kpipe/" KPIPE_VERSION);
  // No SIGALRM for name lookups: programs have signal handlers of their own.
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  if (!settings.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, settings.ca_file.c_str());
  for (const auto& c : settings.connect_to) connect_to.add(c);
  if (connect_to.list != nullptr) curl_easy_setopt(curl, CURLOPT_CONNECT_TO, connect_to.list);
  for (const auto& [name, value] : request.headers) headers.add(name + ": " + value);
  // No "Expect: 100-continue" wait before a large body, where nothing is
  // signed: libcurl 7.88 signs a header removed so ("Expect:") as an
  // empty one it never sends, and the service would refuse the signature.
  if (request.credentials == nullptr) headers.add("Expect:");
  if (request.credentials != nullptr) {
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, request.sigv4_scope.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, request.credentials->access_key_id.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, request.credentials->secret_access_key.c_str());
    if (!request.credentials->session_token.empty())
      headers.add("X-Amz-Security-Token: " + request.credentials->session_token);
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.list);
  if (request.method == "POST" || request.method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    if (request.method == "PUT") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

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
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &response.body);
    curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::max<Millis>(request.timeout, 1)));
    SlistGuard connect_to;
    SlistGuard headers;
    set_request(curl_, request, settings_, connect_to, headers);
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

// A subscription lasts 5 minutes at most; an answer still streaming a
// minute past that has lost its connection without a word.
constexpr long kStreamLimitMs = 6 * 60 * 1000;

class CurlStreaming final : public StreamingTransport {
 public:
  CurlStreaming(CURLM* multi, CurlSettings settings)
      : multi_(multi), settings_(std::move(settings)) {
    // Every request a stream of one connection, a new one waiting for the
    // first to say it multiplexes rather than opening one of its own.
    curl_multi_setopt(multi_, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    h2c_reuse_ = curl_version_info(CURLVERSION_NOW)->version_num >= 0x080000;
  }
  ~CurlStreaming() override {
    for (auto& [id, t] : transfers_) {
      curl_multi_remove_handle(multi_, t->curl);
      curl_easy_cleanup(t->curl);
    }
    curl_multi_cleanup(multi_);
  }
  CurlStreaming(const CurlStreaming&) = delete;
  CurlStreaming& operator=(const CurlStreaming&) = delete;

  Expected<Id> start(const HttpRequest& request) override {
    CURL* curl = curl_easy_init();
    if (curl == nullptr) return failure("cannot make a libcurl handle");
    auto t = std::make_unique<Transfer>();
    t->owner = this;
    t->curl = curl;
    t->id = ++last_id_;
    t->body = request.body;
    HttpRequest kept = request;
    kept.body = {};
    set_request(curl, kept, settings_, t->connect_to, t->headers);
    // The body is the transfer's own copy: the caller's may go.
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, t->body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, t->error);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &CurlStreaming::on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(curl, CURLOPT_PRIVATE, t.get());
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::max<Millis>(request.timeout, 1)));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, kStreamLimitMs);
    bool tls = request.url.rfind("https:", 0) == 0;
    curl_easy_setopt(curl, CURLOPT_HTTP_VERSION,
                     tls ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    if (tls || h2c_reuse_) {
      curl_easy_setopt(curl, CURLOPT_PIPEWAIT, 1L);
    } else {
      // libcurl before 8.0.0 breaks a prior-knowledge connection it
      // reuses ("Error in the HTTP2 framing layer": curl issue 10634,
      // fixed by pull request 10643): Debian 12's 7.88 gives each such
      // request a connection of its own. Over TLS it multiplexes.
      curl_easy_setopt(curl, CURLOPT_FRESH_CONNECT, 1L);
      curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
    }
    if (CURLMcode code = curl_multi_add_handle(multi_, curl); code != CURLM_OK) {
      curl_easy_cleanup(curl);
      return failure("{}", curl_multi_strerror(code));
    }
    Id id = t->id;
    transfers_[id] = std::move(t);
    return id;
  }

  void cancel(Id id) override {
    auto it = transfers_.find(id);
    if (it == transfers_.end()) return;
    curl_multi_remove_handle(multi_, it->second->curl);
    curl_easy_cleanup(it->second->curl);
    transfers_.erase(it);
  }

  Status wait(Millis wait, std::vector<Piece>& out) override {
    out_ = &out;
    int running = 0;
    CURLMcode code = curl_multi_perform(multi_, &running);
    if (code == CURLM_OK && out.empty() && running > 0)
      code =
          curl_multi_poll(multi_, nullptr, 0, static_cast<int>(std::max<Millis>(wait, 0)), nullptr);
    if (code == CURLM_OK) code = curl_multi_perform(multi_, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &t);
      if (t == nullptr) continue;
      Piece& p = piece(*t);
      p.done = true;
      if (m->data.result != CURLE_OK)
        p.error = t->error[0] != '\0' ? t->error : curl_easy_strerror(m->data.result);
      Id id = t->id;
      curl_multi_remove_handle(multi_, t->curl);
      curl_easy_cleanup(t->curl);
      transfers_.erase(id);
    }
    out_ = nullptr;
    if (code != CURLM_OK) return failure("{}", curl_multi_strerror(code));
    return {};
  }

 private:
  struct Transfer {
    CurlStreaming* owner = nullptr;
    CURL* curl = nullptr;
    Id id = 0;
    std::string body;
    SlistGuard connect_to;
    SlistGuard headers;
    char error[CURL_ERROR_SIZE] = "";
  };

  // The piece of this wait for `t`: one per transfer and wait.
  Piece& piece(Transfer& t) {
    for (auto& p : *out_)
      if (p.id == t.id) return p;
    out_->push_back(Piece{});
    out_->back().id = t.id;
    curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &out_->back().status);
    return out_->back();
  }

  static size_t on_data(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    if (t->owner->out_ == nullptr) return size * count;
    t->owner->piece(*t).data.append(data, size * count);
    return size * count;
  }

  CURLM* multi_;
  CurlSettings settings_;
  std::map<Id, std::unique_ptr<Transfer>> transfers_;
  Id last_id_ = 0;
  std::vector<Piece>* out_ = nullptr;
  bool h2c_reuse_ = false;
};

}  // namespace

std::unique_ptr<HttpTransport> make_curl_transport(const CurlSettings& settings) {
  global_init();
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return nullptr;
  return std::make_unique<CurlTransport>(curl, settings);
}

std::unique_ptr<StreamingTransport> make_curl_streaming(const CurlSettings& settings) {
  global_init();
  CURLM* multi = curl_multi_init();
  if (multi == nullptr) return nullptr;
  return std::make_unique<CurlStreaming>(multi, settings);
}

}  // namespace kpipe
