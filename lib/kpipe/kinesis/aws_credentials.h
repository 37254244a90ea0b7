// AWS credentials, found in the order the SDKs look (issue 37): the
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN), the profile in the shared files, web identity
// (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, or the profile's
// web_identity_token_file and role_arn, exchanged at STS's
// AssumeRoleWithWebIdentity, as on EKS), then the instance's role through
// the EC2 instance metadata service, version 2 (a session token first, as
// on EC2). No message ever holds a secret: an error names the source and
// the variable or file, never a key's value.
#pragma once

#include <string>
#include <string_view>

#include "kpipe/kinesis/aws_config.h"
#include "kpipe/kinesis/http.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// The answer of STS's AssumeRoleWithWebIdentity (XML), or its error.
Expected<AwsCredentials> parse_sts_credentials(std::string_view xml, std::string_view source);
// The instance metadata service's credentials document (JSON).
Expected<AwsCredentials> parse_imds_credentials(std::string_view json, std::string_view source);

// Looks in each place in turn; an error when a place is set up wrongly
// (a key without its secret, a token file that cannot be read, STS
// refusing) or when no place has credentials. `read_file` reads token
// files (the shared files were read into `settings` already).
Expected<AwsCredentials> find_aws_credentials(const AwsEnvironment& env,
                                              const AwsSettings& settings, HttpTransport& http,
                                              FileReader read_file, Clock& clock);

}  // namespace kpipe
