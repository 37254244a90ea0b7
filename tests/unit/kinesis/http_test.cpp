#include "kpipe/kinesis/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <string>
#include <thread>

// libcurl's AWS Signature Version 4, as kpipe asks for it, against the
// signature botocore (the AWS SDK for Python, 1.43) gives the same request
// at the same time with the same keys. The request goes to a listener on
// loopback that keeps what it was sent; the Host header stays AWS's
// (CURLOPT_CONNECT_TO), as the signature covers it.
//
// botocore's, computed once (python3, botocore 1.43.11):
//   creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", TOKEN)
//   req = AWSRequest(method="POST", url="http://kinesis.us-east-1.amazonaws.com/",
//                    data=b'{"StreamName":"user-events","Limit":10}',
//                    headers={"Content-Type": "application/x-amz-json-1.1",
//                             "X-Amz-Target": "Kinesis_20131202.ListShards"})
//   with mock.patch("botocore.auth.get_current_datetime",
//                   return_value=datetime.datetime(2026, 12, 5, 10, 15, 30)):
//       SigV4Auth(creds, "kinesis", "us-east-1").add_auth(req)

namespace kpipe {
namespace {

// Accepts one connection, keeps the request (head and body), answers 200.
class OneRequestServer {
 public:
  OneRequestServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 1) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~OneRequestServer() {
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  // After the request was answered.
  const std::string& request() {
    if (thread_.joinable()) thread_.join();
    return request_;
  }
  std::string header(const std::string& name) {
    const std::string& r = request();
    std::string key = "\r\n" + name + ": ";
    auto at = r.find(key);
    if (at == std::string::npos) return "(none)";
    at += key.size();
    return r.substr(at, r.find("\r\n", at) - at);
  }

 private:
  void serve() {
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) break;
      request_.append(buf, static_cast<size_t>(n));
      auto end = request_.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      auto cl = request_.find("Content-Length: ");
      size_t body = cl == std::string::npos ? 0 : std::stoul(request_.substr(cl + 16));
      if (request_.size() >= end + 4 + body) break;
    }
    const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    (void)!::write(c, answer, sizeof answer - 1);
    ::close(c);
  }

  int fd_ = -1;
  int port_ = 0;
  std::string request_;
  std::thread thread_;
};

HttpRequest list_shards(const AwsCredentials& credentials) {
  HttpRequest r;
  r.method = "POST";
  r.url = "http://kinesis.us-east-1.amazonaws.com/";
  r.headers = {{"Content-Type", "application/x-amz-json-1.1"},
               {"X-Amz-Target", "Kinesis_20131202.ListShards"},
               // The time to sign at: libcurl signs with a date header it is given.
               {"X-Amz-Date", "20261205T101530Z"}};
  r.body = R"({"StreamName":"user-events","Limit":10})";
  r.credentials = &credentials;
  r.sigv4_scope = "aws:amz:us-east-1:kinesis";
  return r;
}

}  // namespace

TEST_CASE("curl transport: libcurl's SigV4 signature is botocore's", "[kinesis][http]") {
  OneRequestServer server;
  CurlSettings settings;
  settings.connect_to = {"kinesis.us-east-1.amazonaws.com:80:127.0.0.1:" +
                         std::to_string(server.port())};
  auto http = make_curl_transport(settings);
  REQUIRE(http != nullptr);
  AwsCredentials keys{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "", "test", 0};
  auto answer = http->send(list_shards(keys));
  REQUIRE(answer.ok());
  CHECK(answer->status == 200);
  CHECK(answer->body == "{}");
  CHECK(server.header("Host") == "kinesis.us-east-1.amazonaws.com");
  CHECK(server.header("Authorization") ==
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261205/us-east-1/kinesis/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
        "Signature=89077eb47a8c93f762f99a6888822700b6ab145be12efbf61b1f367a20065627");
  CHECK(server.header("X-Amz-Security-Token") == "(none)");
  CHECK(
      server.request().ends_with("\r\n\r\n"
                                 R"({"StreamName":"user-events","Limit":10})"));
}

TEST_CASE("curl transport: temporary credentials sign their session token too", "[kinesis][http]") {
  OneRequestServer server;
  CurlSettings settings;
  settings.connect_to = {"kinesis.us-east-1.amazonaws.com:80:127.0.0.1:" +
                         std::to_string(server.port())};
  auto http = make_curl_transport(settings);
  AwsCredentials keys{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                      "session-token-example", "test", 0};
  REQUIRE(http->send(list_shards(keys)).ok());
  CHECK(server.header("X-Amz-Security-Token") == "session-token-example");
  CHECK(server.header("Authorization") ==
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261205/us-east-1/kinesis/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target, "
        "Signature=c4b019175bba5dfdea7370a03ea3a26243a7eea0bc1251ca403df80322846b27");
}

TEST_CASE("curl transport: no answer is an error saying why", "[kinesis][http]") {
  // A port just closed: nothing listens there.
  int port;
  {
    OneRequestServer taken;
    port = taken.port();
    auto http = make_curl_transport();
    HttpRequest r;
    r.url = "http://127.0.0.1:" + std::to_string(port) + "/";
    REQUIRE(http->send(r).ok());
  }
  auto http = make_curl_transport();
  HttpRequest r;
  r.url = "http://127.0.0.1:" + std::to_string(port) + "/";
  r.timeout = 2 * kSecond;
  auto answer = http->send(r);
  REQUIRE_FALSE(answer.ok());
  CHECK(answer.error().message.find("onnect") != std::string::npos);
}

}  // namespace kpipe
