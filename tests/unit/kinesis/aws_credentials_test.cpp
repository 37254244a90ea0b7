#include "kpipe/kinesis/aws_credentials.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "fake_http.h"
#include "fakes.h"

// The credentials' chain in the SDKs' order, with STS and the instance
// metadata service answered by a fake transport that keeps what it was
// asked: each source, a source set up wrongly, none at all, and no secret
// in any message.

namespace kpipe {
namespace {

std::map<std::string, std::string> g_files;
std::optional<std::string> read_fake(const std::string& path) {
  auto it = g_files.find(path);
  if (it == g_files.end()) return std::nullopt;
  return it->second;
}

struct Chain {
  AwsEnvironment env;
  AwsSettings settings;
  FakeHttp http;
  FakeClock clock{1796465730000};  // 2026-12-05T10:15:30Z

  Chain() {
    settings.profile = "default";
    settings.region = "eu-west-1";
    settings.credentials_file = "/home/u/.aws/credentials";
    // Off EC2 unless a test says otherwise.
    env.vars["AWS_EC2_METADATA_DISABLED"] = "true";
  }
  Expected<AwsCredentials> find() {
    return find_aws_credentials(env, settings, http, read_fake, clock);
  }
};

const char* kStsAnswer =
    R"(<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>ASIAWEB</AccessKeyId>
      <SecretAccessKey>web/secret&amp;more</SecretAccessKey>
      <SessionToken>web-token</SessionToken>
      <Expiration>2026-12-05T11:15:30Z</Expiration>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>)";

}  // namespace

TEST_CASE("aws credentials: the environment first, both keys or neither",
          "[kinesis][aws_credentials]") {
  Chain c;
  c.env.vars["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  c.env.vars["AWS_SECRET_ACCESS_KEY"] = "env-secret";
  c.env.vars["AWS_SESSION_TOKEN"] = "env-token";
  c.settings.profile_values["aws_access_key_id"] = "AKIDPROFILE";
  c.settings.profile_values["aws_secret_access_key"] = "profile-secret";
  auto got = c.find();
  REQUIRE(got.ok());
  CHECK(got->access_key_id == "AKIDENV");
  CHECK(got->secret_access_key == "env-secret");
  CHECK(got->session_token == "env-token");
  CHECK(got->source == "environment");
  CHECK(c.http.sent.empty());
  c.env.vars.erase("AWS_SECRET_ACCESS_KEY");
  auto half = c.find();
  REQUIRE_FALSE(half.ok());
  CHECK(half.error().status == ExitStatus::kUsage);
  CHECK(half.error().message == "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
}

TEST_CASE("aws credentials: then the profile's keys", "[kinesis][aws_credentials]") {
  Chain c;
  c.settings.profile = "prod";
  c.settings.profile_values["aws_access_key_id"] = "AKIDPROFILE";
  c.settings.profile_values["aws_secret_access_key"] = "profile-secret";
  auto got = c.find();
  REQUIRE(got.ok());
  CHECK(got->access_key_id == "AKIDPROFILE");
  CHECK(got->session_token.empty());
  CHECK(got->source == "profile 'prod'");
  c.settings.profile_values.erase("aws_secret_access_key");
  auto half = c.find();
  REQUIRE_FALSE(half.ok());
  CHECK(half.error().message ==
        "profile 'prod' in '/home/u/.aws/credentials' has only one of aws_access_key_id and "
        "aws_secret_access_key");
}

TEST_CASE("aws credentials: web identity, exchanged at STS", "[kinesis][aws_credentials]") {
  Chain c;
  g_files["/var/run/token"] = "eyJ.token+/=\n";
  c.env.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = "/var/run/token";
  c.env.vars["AWS_ROLE_ARN"] = "arn:aws:iam::123456789012:role/reader";
  c.env.vars["AWS_ROLE_SESSION_NAME"] = "s1";
  c.env.vars["AWS_ENDPOINT_URL_STS"] = "http://127.0.0.1:9/";
  c.http.answers.push_back({"http://127.0.0.1:9/", HttpResponse{200, kStsAnswer}});
  auto got = c.find();
  REQUIRE(got.ok());
  CHECK(got->access_key_id == "ASIAWEB");
  CHECK(got->secret_access_key == "web/secret&more");
  CHECK(got->session_token == "web-token");
  CHECK(got->expires == 1796469330000);
  CHECK(got->source == "web identity (role 'arn:aws:iam::123456789012:role/reader')");
  REQUIRE(c.http.sent.size() == 1);
  CHECK(c.http.sent[0].method == "POST");
  CHECK(c.http.sent[0].credentials == nullptr);  // the token is the proof, unsigned
  CHECK(c.http.sent[0].body ==
        "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A"
        "123456789012%3Arole%2Freader&RoleSessionName=s1&WebIdentityToken=eyJ.token%2B%2F%3D");

  // Refused: STS's code and message, never the token.
  c.http.answers.push_back(
      {"", HttpResponse{403,
                        "<ErrorResponse><Error><Code>InvalidIdentityToken</Code><Message>"
                        "Token expired</Message></Error></ErrorResponse>"}});
  auto refused = c.find();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message ==
        "web identity (role 'arn:aws:iam::123456789012:role/reader'): STS at http://127.0.0.1:9 "
        "refused AssumeRoleWithWebIdentity: HTTP 403: InvalidIdentityToken: Token expired");
  CHECK(refused.error().message.find("eyJ") == std::string::npos);

  // The profile's role and token file win over the environment's.
  g_files["/p/token"] = "ptoken";
  c.settings.profile_values["role_arn"] = "arn:aws:iam::1:role/p";
  c.settings.profile_values["web_identity_token_file"] = "/p/token";
  c.http.answers.push_back({"", HttpResponse{200, kStsAnswer}});
  REQUIRE(c.find().ok());
  CHECK(c.http.sent.back().body.find("WebIdentityToken=ptoken") != std::string::npos);
  CHECK(c.http.sent.back().body.find("RoleSessionName=kpipe-1796465730000") != std::string::npos);

  c.settings.profile_values["web_identity_token_file"] = "/p/missing";
  CHECK(c.find().error().message ==
        "web identity (role 'arn:aws:iam::1:role/p'): cannot read the web identity token file "
        "'/p/missing'");
}

TEST_CASE("aws credentials: the instance's role through IMDSv2", "[kinesis][aws_credentials]") {
  Chain c;
  c.env.vars.erase("AWS_EC2_METADATA_DISABLED");
  c.env.vars["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "http://127.0.0.1:8/";
  c.http.answers.push_back(
      {"http://127.0.0.1:8/latest/api/token", HttpResponse{200, "imds-token"}});
  c.http.answers.push_back({"http://127.0.0.1:8/latest/meta-data/iam/security-credentials/",
                            HttpResponse{200, "ec2-role\n"}});
  c.http.answers.push_back(
      {"http://127.0.0.1:8/latest/meta-data/iam/security-credentials/ec2-role",
       HttpResponse{200, R"({"Code":"Success","Type":"AWS-HMAC","AccessKeyId":"ASIAEC2",
         "SecretAccessKey":"ec2-secret","Token":"ec2-token","Expiration":"2026-12-05T16:15:30Z"})"}});
  auto got = c.find();
  REQUIRE(got.ok());
  CHECK(got->access_key_id == "ASIAEC2");
  CHECK(got->session_token == "ec2-token");
  CHECK(got->source == "instance role 'ec2-role'");
  CHECK(got->expires == 1796487330000);
  REQUIRE(c.http.sent.size() == 3);
  CHECK(c.http.sent[0].method == "PUT");
  CHECK(c.http.sent[0].headers == std::vector<std::pair<std::string, std::string>>{
                                      {"X-aws-ec2-metadata-token-ttl-seconds", "21600"}});
  CHECK(c.http.sent[2].headers == std::vector<std::pair<std::string, std::string>>{
                                      {"X-aws-ec2-metadata-token", "imds-token"}});
  CHECK(c.http.sent[0].timeout == kSecond);
}

TEST_CASE("aws credentials: none anywhere says where they may be given",
          "[kinesis][aws_credentials]") {
  Chain c;
  c.env.vars.erase("AWS_EC2_METADATA_DISABLED");
  // The default metadata address leads nowhere off EC2: no error of its own.
  auto none = c.find();
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().status == ExitStatus::kUsage);
  CHECK(none.error().message ==
        "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile with "
        "AWS_PROFILE (now 'default', in '/home/u/.aws/credentials'), set "
        "AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, or run where the instance metadata service "
        "gives a role");
  REQUIRE(c.http.sent.size() == 1);
  CHECK(c.http.sent[0].url == "http://169.254.169.254/latest/api/token");
  // A metadata service that was named must answer.
  c.env.vars["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "http://127.0.0.1:7";
  CHECK(c.find().error().message ==
        "instance metadata at http://127.0.0.1:7 could not be reached: Connection refused");
}

}  // namespace kpipe
