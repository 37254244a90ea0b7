// Where AWS's conventions say a program finds its region, its endpoint and
// its profile, as the SDKs and the AWS CLI read them: options first, then
// the environment, then the shared files (~/.aws/config and
// ~/.aws/credentials). What is read is passed in (AwsEnvironment), so that
// the rules are tested without touching the process's environment or home.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "kpipe/status.h"

namespace kpipe {

// The AWS_* variables a program was started with, and its home.
struct AwsEnvironment {
  std::map<std::string, std::string, std::less<>> vars;
  std::string home;

  // The process's own (getenv).
  static AwsEnvironment from_process();
  // A variable's value; empty when unset or empty.
  std::string get(std::string_view name) const;
};

// One section of a shared file: its keys (lower-case) and values.
using AwsProfile = std::map<std::string, std::string, std::less<>>;

// The profiles of a shared file, by name. The config file names them
// "[profile NAME]" (and "[default]"), the credentials file "[NAME]";
// `config` says which this is. Comments (# and ;) and blank lines are
// skipped; a line that is neither a section, a key = value nor a nested
// setting's continuation is an error naming `name` and the line.
Expected<std::map<std::string, AwsProfile>> parse_aws_shared_file(std::string_view text,
                                                                  bool config,
                                                                  std::string_view name);

// What a program needs to reach Kinesis.
struct AwsSettings {
  std::string profile;   // AWS_PROFILE, else "default"
  std::string region;    // --region, AWS_REGION, AWS_DEFAULT_REGION, the profile's
  std::string endpoint;  // --endpoint, AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL, else AWS's
  // The profile's settings from both files (the credentials file wins on
  // keys it shares with the config file), for the credentials' chain.
  AwsProfile profile_values;
  std::string credentials_file;  // AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials
  std::string config_file;       // AWS_CONFIG_FILE, else ~/.aws/config
};

// `read_file`: the text of a shared file, nullopt when there is none.
using FileReader = std::optional<std::string> (*)(const std::string& path);

// A missing region is an error that says where one may be given.
Expected<AwsSettings> resolve_aws_settings(std::string_view region_option,
                                           std::string_view endpoint_option,
                                           const AwsEnvironment& env, FileReader read_file);

// The file's text, nullopt when it does not exist (an unreadable one is
// also nullopt: the SDKs skip it alike).
std::optional<std::string> read_text_file(const std::string& path);

}  // namespace kpipe
