# Shared by the cli tests: sourced, never run. In LLVM's manner: the input
# written in the test, then the exact stdout, stderr and exit status.
set -euo pipefail
: "${KPIPE_BIN:?KPIPE_BIN must name the directory of the kpipe binaries}"
: "${KPIPE_SOURCE_DIR:?KPIPE_SOURCE_DIR must name the source tree}"
export PATH="$KPIPE_BIN:$PATH"
unset KPIPE_BROKERS
TEST_NAME=$(basename "$0" .sh)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kpipe-cli-${TEST_NAME}.XXXXXX")
# No one's own default client file (kpipe(7), KAFKA OPTIONS) reaches a test.
unset KPIPE_CONFIG
export XDG_CONFIG_HOME="$WORK/config"
trap 'status=$?; [[ $status -eq 0 ]] && rm -rf "$WORK"; exit $status' EXIT

fail() {
  echo "FAIL: $TEST_NAME: $*" >&2
  exit 1
}

# run STATUS CMD...: stdout to $WORK/out, stderr to $WORK/err.
run() {
  local want=$1
  shift
  local got=0
  "$@" >"$WORK/out" 2>"$WORK/err" || got=$?
  if [[ "$got" != "$want" ]]; then
    echo "--- stdout" >&2; head -c 2000 "$WORK/out" >&2 || true
    echo "--- stderr" >&2; head -c 2000 "$WORK/err" >&2 || true
    fail "'$*' exited $got, expected $want"
  fi
}

# expect_stdout TEXT / expect_stderr TEXT: the whole stream, exactly.
expect_stdout() {
  diff <(printf '%s' "$1") "$WORK/out" >&2 || fail "stdout differs (above: - expected, + got)"
}
expect_stderr() {
  diff <(printf '%s' "$1") "$WORK/err" >&2 || fail "stderr differs (above: - expected, + got)"
}
expect_no_stderr() {
  [[ ! -s "$WORK/err" ]] || fail "unexpected stderr: $(head -c 1000 "$WORK/err")"
}

# The programs, from the tools directory: a new tool is covered by the
# common tests as soon as it exists.
programs() {
  local d
  for d in "$KPIPE_SOURCE_DIR"/tools/*/; do basename "$d"; done
}
