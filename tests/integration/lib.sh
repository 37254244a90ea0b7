# Shared by the integration tests: sourced, never run. Each test runs the
# real binaries against a broker: kbroker by default, or a real Apache Kafka
# when KPIPE_TEST_BROKER=kafka: the one scripts/kafka runs (ctest's fixture
# starts it, see tests/CMakeLists.txt), or the one KPIPE_TEST_BOOTSTRAP names.
# ctest runs every test against both.
set -euo pipefail

: "${KPIPE_BIN:?KPIPE_BIN must name the directory of the kpipe binaries}"
: "${KPIPE_SOURCE_DIR:?KPIPE_SOURCE_DIR must name the source tree}"
export PATH="$KPIPE_BIN:$PATH"
KPIPE_TEST_BROKER=${KPIPE_TEST_BROKER:-kbroker}
case "$KPIPE_TEST_BROKER" in
  kbroker | kafka) ;;
  *)
    echo "KPIPE_TEST_BROKER must be kbroker or kafka, not '$KPIPE_TEST_BROKER'" >&2
    exit 1
    ;;
esac
unset KPIPE_BROKERS

TEST_NAME=$(basename "$0" .sh)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kpipe-${TEST_NAME}.XXXXXX")
# Topic and group names are unique per run, so that tests can share one
# real broker.
RUN_ID="${TEST_NAME}-$$-${RANDOM}"
BROKER_PID=""

cleanup() {
  local status=$?
  if [[ -n "$BROKER_PID" ]]; then
    kill "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
  fi
  # Background jobs a test left behind.
  local jobs_left
  jobs_left=$(jobs -p)
  if [[ -n "$jobs_left" ]]; then
    kill $jobs_left 2>/dev/null || true
    wait 2>/dev/null || true
  fi
  if [[ $status -eq 0 ]]; then
    rm -rf "$WORK"
  else
    echo "(work files kept in $WORK)" >&2
  fi
  exit $status
}
trap cleanup EXIT

fail() {
  echo "FAIL: $TEST_NAME: $*" >&2
  exit 1
}

# topic NAME: the run's name for a topic.
topic() { echo "${RUN_ID}-$1"; }
group() { echo "${RUN_ID}-g-$1"; }

# start_broker NAME:PARTITIONS...: a broker holding these topics (names as
# given to `topic`). Sets BROKERS.
start_broker() {
  local specs=() spec
  for spec in "$@"; do specs+=("$(topic "${spec%%:*}"):${spec##*:}"); done
  if [[ "$KPIPE_TEST_BROKER" == kafka ]]; then
    BROKERS=${KPIPE_TEST_BOOTSTRAP:-$(kafka_tool address)} || fail "no real Kafka is running (scripts/kafka up)"
    local args=()
    for spec in "${specs[@]}"; do args+=("${spec%%:*}" "${spec##*:}"); done
    # One call for all: it waits until every partition has a leader.
    ((${#args[@]} == 0)) || kafka_tool topic "${args[@]}" >/dev/null || fail "cannot create topics ${specs[*]}"
    return
  fi
  local args=() fifo="$WORK/kbroker.out"
  for spec in "${specs[@]}"; do args+=(--topic "$spec"); done
  mkfifo "$fifo"
  kbroker "${args[@]}" >"$fifo" 2>"$WORK/kbroker.err" &
  BROKER_PID=$!
  # kbroker prints its bootstrap list as its first line: reading it is the
  # synchronisation, no sleep needed.
  exec 9<"$fifo"
  if ! read -r -t 30 BROKERS <&9; then
    cat "$WORK/kbroker.err" >&2
    fail "kbroker did not start"
  fi
  # Keep draining kbroker's stdout so that it never blocks on the fifo.
  cat <&9 >/dev/null &
  exec 9<&-
}

# requires_broker kafka REASON: this test runs on that broker only (exit 77,
# "skipped", on the other), and says why.
requires_broker() {
  if [[ "$KPIPE_TEST_BROKER" != "$1" ]]; then
    echo "SKIP: $TEST_NAME needs $1${2:+: $2} (running against $KPIPE_TEST_BROKER)"
    exit 77
  fi
}

# kafka_tool ARGS...: scripts/kafka (the real broker's tools: groups, topics,
# topic, address).
kafka_tool() { "$KPIPE_SOURCE_DIR/scripts/kafka" "$@"; }

# describe_group GROUP: Kafka's own view of a group's committed offsets, one
# "TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG" line per partition,
# sorted (real Kafka only: kbroker has no group describe).
describe_group() {
  kafka_tool groups --describe --group "$1" >"$WORK/describe.out" 2>"$WORK/describe.err" ||
    fail "kafka-consumer-groups --describe --group $1 failed: $(cat "$WORK/describe.err")"
  awk '$1 == G && NF >= 6 { print $2, $3, $4, $5, $6 }' G="$1" "$WORK/describe.out" | sort -k1,1 -k2,2n
}

# wait_for DESCRIPTION SECONDS COMMAND...: until COMMAND succeeds (it looks
# at output a test is waiting on), or fails the test after SECONDS.
wait_for() {
  local what=$1 limit=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after ${limit}s waiting for $what"
    sleep 0.05
  done
}

# lines FILE: its number of lines (0 when it does not exist yet).
lines() { if [[ -f "$1" ]]; then wc -l <"$1"; else echo 0; fi; }

# expect_exit CODE CMD...: runs CMD with stdout to $WORK/out and stderr to
# $WORK/err, and fails unless it exits with CODE.
expect_exit() {
  local want=$1
  shift
  local got=0
  "$@" >"$WORK/out" 2>"$WORK/err" || got=$?
  if [[ "$got" != "$want" ]]; then
    echo "--- stdout" >&2
    head -c 2000 "$WORK/out" >&2 || true
    echo "--- stderr" >&2
    head -c 2000 "$WORK/err" >&2 || true
    fail "'$*' exited $got, expected $want"
  fi
}

assert_eq() {
  local got=$1 want=$2 what=${3:-value}
  [[ "$got" == "$want" ]] || fail "$what: got '$got', expected '$want'"
}

assert_files_equal() {
  if ! cmp -s "$1" "$2"; then
    diff <(head -c 100000 "$1") <(head -c 100000 "$2") | head -20 >&2 || true
    fail "$1 and $2 differ"
  fi
}

assert_contains() {
  local file=$1 text=$2
  grep -qF -- "$text" "$file" || fail "$file does not contain '$text' (it has: $(head -c 500 "$file"))"
}

assert_empty() {
  [[ ! -s "$1" ]] || fail "$1 is not empty: $(head -c 500 "$1")"
}
