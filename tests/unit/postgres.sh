#!/usr/bin/env bash
# The unit tests that need a real PostgreSQL ([postgres-server]: the
# store's PostgreSQL backends), run against a database of their own on the
# server the ctest fixture "postgres" started (scripts/postgres up).
#
#   postgres.sh UNIT_TESTS_BINARY
set -euo pipefail
server=$("$KPIPE_SOURCE_DIR/scripts/postgres" address)
db=kpipe_unit_$$_$RANDOM
psql -XAtq -v ON_ERROR_STOP=1 "$server" -c "CREATE DATABASE $db" >/dev/null
trap 'psql -XAtq "$server" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true' EXIT
KPIPE_TEST_POSTGRES_URL="${server%/*}/$db" "$1" "[postgres-server]"
