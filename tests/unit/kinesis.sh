#!/usr/bin/env bash
# The unit tests that need a real Kinesis API ([kinesis-server]: the
# Kinesis client as kpipe signs and retries its calls), run against the
# local Kinesis the ctest fixture "kinesis" started (scripts/kinesis up).
#
#   kinesis.sh UNIT_TESTS_BINARY
set -euo pipefail
KPIPE_TEST_KINESIS_URL=$("$KPIPE_SOURCE_DIR/scripts/kinesis" address) "$1" "[kinesis-server]"
