#include "kpipe/kinesis/aws_config.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>

// Region, endpoint and profile as AWS's conventions find them: options,
// then the environment, then the shared files, read from a map here.

namespace kpipe {
namespace {

std::map<std::string, std::string>& files() {
  static std::map<std::string, std::string> f;
  return f;
}

std::optional<std::string> read_fake(const std::string& path) {
  auto it = files().find(path);
  if (it == files().end()) return std::nullopt;
  return it->second;
}

AwsEnvironment env(std::map<std::string, std::string> vars) {
  AwsEnvironment e;
  for (auto& [k, v] : vars) e.vars.emplace(k, v);
  e.home = "/home/u";
  return e;
}

}  // namespace

TEST_CASE("aws shared files: profiles as the config and credentials files name them",
          "[kinesis][aws_config]") {
  auto config = parse_aws_shared_file(R"(# a comment
[default]
region = eu-west-1

[profile prod]
region=us-east-2
Role_Arn = arn:aws:iam::123:role/r
s3 =
  max_concurrent_requests = 10
; another comment
[sso-session corp]
sso_region = us-east-1
)",
                                      true, "config");
  REQUIRE(config.ok());
  CHECK(config->size() == 2);
  CHECK(config->at("default").at("region") == "eu-west-1");
  CHECK(config->at("prod").at("region") == "us-east-2");
  CHECK(config->at("prod").at("role_arn") == "arn:aws:iam::123:role/r");
  CHECK(config->at("prod").count("max_concurrent_requests") == 0);
  // The credentials file names profiles without "profile ".
  auto creds = parse_aws_shared_file("[prod]\naws_access_key_id = AKID\n", false, "credentials");
  REQUIRE(creds.ok());
  CHECK(creds->at("prod").at("aws_access_key_id") == "AKID");
  // A line that is no setting names the file and the line.
  auto bad = parse_aws_shared_file("[default]\nregion\n", true, "/home/u/.aws/config");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message ==
        "/home/u/.aws/config: line 2: expected 'key = value' or '[section]'");
  CHECK(parse_aws_shared_file("[default\n", true, "c").error().message ==
        "c: line 1: a section header lacks its ']'");
}

TEST_CASE("aws settings: the region from the option, the environment, then the profile",
          "[kinesis][aws_config]") {
  files() = {
      {"/home/u/.aws/config", "[default]\nregion = eu-west-1\n[profile p]\nregion = ap-south-1\n"}};
  auto s = resolve_aws_settings("", "", env({}), read_fake);
  REQUIRE(s.ok());
  CHECK(s->profile == "default");
  CHECK(s->region == "eu-west-1");
  CHECK(s->endpoint == "https://kinesis.eu-west-1.amazonaws.com");
  CHECK(
      resolve_aws_settings("", "", env({{"AWS_DEFAULT_REGION", "us-west-1"}}), read_fake)->region ==
      "us-west-1");
  CHECK(resolve_aws_settings(
            "", "", env({{"AWS_REGION", "us-west-2"}, {"AWS_DEFAULT_REGION", "x"}}), read_fake)
            ->region == "us-west-2");
  CHECK(resolve_aws_settings("sa-east-1", "", env({{"AWS_REGION", "us-west-2"}}), read_fake)
            ->region == "sa-east-1");
  CHECK(resolve_aws_settings("", "", env({{"AWS_PROFILE", "p"}}), read_fake)->region ==
        "ap-south-1");
  // Named, a profile must exist; a region must be found somewhere.
  auto missing = resolve_aws_settings("", "", env({{"AWS_PROFILE", "nope"}}), read_fake);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().status == ExitStatus::kUsage);
  CHECK(missing.error().message ==
        "AWS_PROFILE 'nope': no such profile in '/home/u/.aws/config' or "
        "'/home/u/.aws/credentials'");
  files().clear();
  auto none = resolve_aws_settings("", "", env({}), read_fake);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message ==
        "no AWS region: give --region, set AWS_REGION, or set region in profile 'default' of "
        "'/home/u/.aws/config'");
}

TEST_CASE("aws settings: the endpoint, and the files where the environment says",
          "[kinesis][aws_config]") {
  files() = {{"/etc/aws-config", "[default]\nregion = eu-west-1\nendpoint_url = http://p:1\n"},
             {"/etc/aws-creds", "[default]\naws_access_key_id = AKID\nregion = eu-north-1\n"}};
  auto e = env(
      {{"AWS_CONFIG_FILE", "/etc/aws-config"}, {"AWS_SHARED_CREDENTIALS_FILE", "/etc/aws-creds"}});
  auto s = resolve_aws_settings("", "", e, read_fake);
  REQUIRE(s.ok());
  CHECK(s->config_file == "/etc/aws-config");
  CHECK(s->credentials_file == "/etc/aws-creds");
  // The credentials file wins where both files set a key.
  CHECK(s->region == "eu-north-1");
  CHECK(s->profile_values.at("aws_access_key_id") == "AKID");
  CHECK(s->endpoint == "http://p:1");
  e.vars["AWS_ENDPOINT_URL"] = "http://all:2/";
  CHECK(resolve_aws_settings("", "", e, read_fake)->endpoint == "http://all:2");
  e.vars["AWS_ENDPOINT_URL_KINESIS"] = "http://kinesis:3";
  CHECK(resolve_aws_settings("", "", e, read_fake)->endpoint == "http://kinesis:3");
  CHECK(resolve_aws_settings("", "http://option:4", e, read_fake)->endpoint == "http://option:4");
  CHECK(resolve_aws_settings("", "kinesis:4", e, read_fake).error().message ==
        "endpoint 'kinesis:4': expected an http:// or https:// URL");
}

}  // namespace kpipe
