// What KinesisLog is made of, for its tests: a log over a given transport
// and credentials (the tests' fake HTTP), where KinesisLog::open makes
// libcurl's and walks AWS's chain. Private to kinesis/ and its tests.
#pragma once

#include <memory>
#include <string>

#include "kpipe/kinesis/http.h"
#include "kpipe/kinesis/kinesis_client.h"
#include "kpipe/kinesis/kinesis_log.h"

namespace kpipe {

KinesisLog make_kinesis_log(AwsSettings settings, std::string stream,
                            std::shared_ptr<HttpTransport> http, CredentialSource credentials,
                            Clock& clock, Millis timeout);

}  // namespace kpipe
