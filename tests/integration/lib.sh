# Shared by the integration tests: sourced, never run. Each test runs the
# real binaries against a broker: kbroker by default, or a real Apache Kafka
# when KPIPE_TEST_BROKER=kafka: the one scripts/kafka runs (ctest's fixture
# starts it, see tests/CMakeLists.txt), or the one KPIPE_TEST_BOOTSTRAP names.
# ctest runs every test against both.
#
# Stores (state, dead letters, kupsert's table) are SQLite files by default,
# or databases on a real PostgreSQL when KPIPE_TEST_STORE=postgres: the one
# scripts/postgres runs with KPIPE_POSTGRES_STATE (ctest's fixture
# "postgres" starts it). A test names its stores with `store` and reads
# them with `sql`, and so runs unchanged on both.
set -euo pipefail

: "${KPIPE_BIN:?KPIPE_BIN must name the directory of the kpipe binaries}"
: "${KPIPE_SOURCE_DIR:?KPIPE_SOURCE_DIR must name the source tree}"
export PATH="$KPIPE_BIN:$PATH"
KPIPE_TEST_BROKER=${KPIPE_TEST_BROKER:-kbroker}
case "$KPIPE_TEST_BROKER" in
  kbroker | kafka | cluster) ;;
  *)
    echo "KPIPE_TEST_BROKER must be kbroker, kafka or cluster, not '$KPIPE_TEST_BROKER'" >&2
    exit 1
    ;;
esac
unset KPIPE_BROKERS
KPIPE_TEST_STORE=${KPIPE_TEST_STORE:-sqlite}
case "$KPIPE_TEST_STORE" in
  sqlite) ;;
  postgres)
    # The server's URI, postgresql://kpipe@127.0.0.1:PORT/postgres: each
    # store is a database of its own on it.
    PG_SERVER=$("$KPIPE_SOURCE_DIR/scripts/postgres" address) || {
      echo "KPIPE_TEST_STORE=postgres: no PostgreSQL is running (scripts/postgres up, with this KPIPE_POSTGRES_STATE)" >&2
      exit 1
    }
    ;;
  *)
    echo "KPIPE_TEST_STORE must be sqlite or postgres, not '$KPIPE_TEST_STORE'" >&2
    exit 1
    ;;
esac

TEST_NAME=$(basename "$0" .sh)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kpipe-${TEST_NAME}.XXXXXX")
# No one's own default client file (kpipe(7), KAFKA OPTIONS) reaches a test.
unset KPIPE_CONFIG
export XDG_CONFIG_HOME="$WORK/config"
# Topic and group names are unique per run, so that tests can share one
# real broker.
RUN_RANDOM=$RANDOM
RUN_ID="${TEST_NAME}-$$-${RUN_RANDOM}"
BROKER_PID=""
PIPELINE=""  # run_pipeline's session
SESSIONS=()  # start_session's sessions

cleanup() {
  local status=$?
  # A crash test's pipeline, and a group test's instances, are sessions of
  # their own, out of reach of the jobs below: left running, a stage that
  # writes to the test's stdout would hold ctest until its timeout.
  local session
  for session in $PIPELINE "${SESSIONS[@]}"; do
    kill -KILL -- -"$session" 2>/dev/null || true
  done
  if [[ -n "$BROKER_PID" ]]; then
    kill "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
  fi
  # A broker that own_kafka started for this test alone.
  [[ -z "${OWN_KAFKA:-}" ]] || KPIPE_KAFKA_STATE="$OWN_KAFKA" "$KPIPE_SOURCE_DIR/scripts/kafka" down || true
  # A registry that registry_url started for this test alone.
  [[ ! -d "$WORK/registry" ]] || KPIPE_REGISTRY_STATE="$WORK/registry" "$KPIPE_SOURCE_DIR/scripts/registry" down || true
  # A kinesis-mock that kinesis_endpoint started for this test alone.
  [[ ! -d "$WORK/kinesis" ]] || KPIPE_KINESIS_STATE="$WORK/kinesis" "$KPIPE_SOURCE_DIR/scripts/kinesis" down || true
  # A PostgreSQL started for this test alone (postgres_tls: up --tls).
  [[ ! -d "$WORK/postgres" ]] || KPIPE_POSTGRES_STATE="$WORK/postgres" "$KPIPE_SOURCE_DIR/scripts/postgres" down || true
  # Background jobs a test left behind.
  local jobs_left
  jobs_left=$(jobs -p)
  if [[ -n "$jobs_left" ]]; then
    kill $jobs_left 2>/dev/null || true
    wait 2>/dev/null || true
  fi
  if [[ $status -eq 0 ]]; then
    drop_stores
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

# store NAME: a new, empty store for the test to name in --state, --dlq
# and kupsert --db: "$WORK/NAME.db", or with KPIPE_TEST_STORE=postgres the
# URI of a database created for it (its name unique to the run, as
# PostgreSQL spells names: lower case, digits, _; at most 63 bytes). Called
# as $(store NAME): what is created is noted in a file, as the subshell
# keeps no variable.
store() {
  local name=$1
  if [[ "$KPIPE_TEST_STORE" != postgres ]]; then
    echo "$WORK/$name.db"
    return
  fi
  local n db
  n=$(($(lines "$WORK/.stores") + 1))
  db=$(printf 'kpipe_%s_%s_%s_%s' "$$" "$RUN_RANDOM" "$n" "$TEST_NAME-$name" | tr '[:upper:]' '[:lower:]' | tr -c 'a-z0-9_' '_' | cut -c1-63)
  echo "$db" >>"$WORK/.stores"
  psql -XAtq -v ON_ERROR_STOP=1 "$PG_SERVER" -c "CREATE DATABASE \"$db\"" >"$WORK/.store.err" 2>&1 ||
    fail "cannot create database $db for store $name: $(cat "$WORK/.store.err")"
  echo "${PG_SERVER%/*}/$db"
}

# drop_stores: after a test that passed, its databases go (a failed test
# keeps them, as it keeps $WORK; the fixture's `down` removes the server).
drop_stores() {
  [[ "$KPIPE_TEST_STORE" == postgres && -s "$WORK/.stores" ]] || return 0
  local db
  while read -r db; do
    psql -XAtq "$PG_SERVER" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 ||
      echo "(could not drop database $db)" >&2
  done <"$WORK/.stores"
}

# is_postgres TARGET: whether a store is a PostgreSQL target rather than a
# file ("postgresql://..." or "postgresql:" and a conninfo).
is_postgres() { [[ "$1" == postgresql:* ]]; }

# pg_conninfo TARGET: what psql takes for a PostgreSQL target.
pg_conninfo() { if [[ "$1" == postgresql://* ]]; then echo "$1"; else echo "${1#postgresql:}"; fi; }

# sql [--readonly] TARGET [QUERY]: runs QUERY (or standard input) on a store
# and prints the rows as sqlite3 does by default: columns separated by |,
# no header, NULL empty. Write queries that both dialects take ("offset"
# quoted; no typeof(); booleans print 1/0 from SQLite, t/f from psql).
# --readonly: a read-only connection (sqlite3 -readonly, or read-only
# transactions on PostgreSQL). Fails as the client does on an error.
sql() {
  local readonly=false
  [[ "$1" != --readonly ]] || { readonly=true; shift; }
  local target=$1
  shift
  if is_postgres "$target"; then
    local options=${PGOPTIONS:-}
    ! $readonly || options+=" -c default_transaction_read_only=on"
    if (($#)); then
      PGOPTIONS=$options psql -XAtq -F'|' -v ON_ERROR_STOP=1 "$(pg_conninfo "$target")" -c "$1"
    else
      PGOPTIONS=$options psql -XAtq -F'|' -v ON_ERROR_STOP=1 "$(pg_conninfo "$target")"
    fi
  else
    local args=(-batch)
    ! $readonly || args+=(-readonly)
    sqlite3 "${args[@]}" "$target" "$@"
  fi
}

# sql_session TARGET: one long-lived client reading queries, one a line,
# on standard input (for a coprocess: each answer is flushed at once).
sql_session() {
  if is_postgres "$1"; then
    psql -XAtq -F'|' -v ON_ERROR_STOP=1 "$(pg_conninfo "$1")"
  else
    sqlite3 -batch "$1"
  fi
}

# has_table TARGET NAME: prints 1 when the store has that table, else 0.
has_table() {
  if is_postgres "$1"; then
    sql "$1" "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = '$2'"
  else
    sql --readonly "$1" "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = '$2'"
  fi
}

# topic NAME: the run's name for a topic.
topic() { echo "${RUN_ID}-$1"; }
group() { echo "${RUN_ID}-g-$1"; }

# start_broker NAME:PARTITIONS...: a broker holding these topics (names as
# given to `topic`). Sets BROKERS.
start_broker() {
  local specs=() spec
  for spec in "$@"; do specs+=("$(topic "${spec%%:*}"):${spec##*:}"); done
  if [[ "$KPIPE_TEST_BROKER" == kafka || "$KPIPE_TEST_BROKER" == cluster ]]; then
    [[ "$KPIPE_TEST_BROKER" != cluster || -n "${OWN_KAFKA:-}" ]] || own_cluster
    BROKERS=${KPIPE_TEST_BOOTSTRAP:-$(kafka_tool address)} || fail "no real Kafka is running (scripts/kafka up)"
    local args=()
    for spec in "${specs[@]}"; do args+=("${spec%%:*}" "${spec##*:}"); done
    # One call for all: it waits until every partition has a leader.
    ((${#args[@]} == 0)) || kafka_tool topic "${args[@]}" >/dev/null || fail "cannot create topics ${specs[*]}"
    return
  fi
  local args=()
  for spec in "${specs[@]}"; do args+=(--topic "$spec"); done
  start_test_kbroker "${args[@]}"
  # Keep draining kbroker's stdout so that it never blocks on the fifo.
  cat <&"$KBROKER_OUT" >/dev/null &
  exec {KBROKER_OUT}<&-
}

# run_kbroker OUT ERR ARGS...: starts kbroker ARGS in the background, its
# standard output on OUT (a FIFO made here), its standard error to ERR.
# KBROKER_PID is its pid, KBROKER_OUT a descriptor open on OUT (the caller
# closes it, or keeps it to read kbroker's answers), KBROKER_ADDRESS its
# bootstrap list. kbroker prints that as its first line: reading it is the
# synchronisation, no sleep needed. Fails if none came within 30 s.
run_kbroker() {
  local out=$1 err=$2
  shift 2
  mkfifo "$out"
  kbroker "$@" >"$out" 2>"$err" &
  KBROKER_PID=$!
  exec {KBROKER_OUT}<"$out"
  read -r -t 30 KBROKER_ADDRESS <&"$KBROKER_OUT"
}

# start_test_kbroker ARGS...: the test's kbroker (run_kbroker with its
# output in $WORK/kbroker.out and .err): sets BROKER_PID (stopped when the
# test ends) and BROKERS, or fails the test with kbroker's complaint.
start_test_kbroker() {
  local started=true
  run_kbroker "$WORK/kbroker.out" "$WORK/kbroker.err" "$@" || started=false
  BROKER_PID=$KBROKER_PID
  if ! $started; then
    cat "$WORK/kbroker.err" >&2
    fail "kbroker did not start"
  fi
  BROKERS=$KBROKER_ADDRESS
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

# own_kafka: a real Apache Kafka for this test alone, for the tests that
# crash, restart and pause their broker (kafka_tool crash, restart, pause,
# resume): the shared one is never disturbed. Its state is $WORK/kafka, its
# address $BROKERS; start_broker makes its topics; it stops when the test
# ends. A broker restarted after a crash registers again at once, not after
# the default 9 s that its old registration takes to lapse.
own_kafka() {
  requires_broker kafka "it crashes, restarts and pauses a real Kafka of its own (scripts/kafka crash)"
  OWN_KAFKA="$WORK/kafka"
  export KPIPE_KAFKA_STATE="$OWN_KAFKA"
  unset KPIPE_TEST_BOOTSTRAP
  # Not in a subshell: scripts/kafka's parent is this test, which the
  # broker's watchdog outlives by nothing.
  KPIPE_KAFKA_EXTRA_CONFIG=$'broker.session.timeout.ms=3000\nbroker.heartbeat.interval.ms=500' \
    kafka_tool up --stop-with-parent >"$WORK/kafka.address" 2>"$WORK/kafka.up" ||
    fail "cannot start a Kafka of its own: $(cat "$WORK/kafka.up")"
  BROKERS=$(tail -n 1 "$WORK/kafka.address")
}

# broker COMMAND...: kafka_tool's fault COMMAND (crash, restart, pause,
# resume) on own_kafka's broker, its complaints added to $WORK/kafka.faults.
# A broker it restarts inherits no descriptor 7 (where the tests keep a
# FIFO's writing end: its reader would never see its input end).
broker() { kafka_tool "$@" 7>&- 2>>"$WORK/kafka.faults"; }

# own_cluster [BROKERS [UP-OPTIONS...]]: a production-shaped Kafka for this test alone
# (tests/cluster/, KPIPE_TEST_BROKER=cluster): BROKERS nodes (3 by default:
# replication factor 3, min.insync.replicas=2), SASL_SSL with SCRAM-SHA-512
# and ACLs (scripts/kafka up --secure). The admin's client file is the
# default of every kpipe program (KPIPE_CONFIG) and of kcat (KCAT_CONFIG);
# a test of least privilege gives its own with --config, from
# `kafka_tool user NAME`. start_broker calls it when the test has not.
# A node restarted after a crash registers again at once, not after the 9 s
# its old registration takes to lapse.
own_cluster() {
  local brokers=${1:-3}
  shift || true
  requires_broker cluster "it needs a replicated, secure Kafka of its own (scripts/kafka up --brokers 3 --secure)"
  OWN_KAFKA="$WORK/kafka"
  export KPIPE_KAFKA_STATE="$OWN_KAFKA"
  unset KPIPE_TEST_BOOTSTRAP
  KPIPE_KAFKA_EXTRA_CONFIG=$'broker.session.timeout.ms=3000\nbroker.heartbeat.interval.ms=500' \
    kafka_tool up --brokers "$brokers" --secure "$@" --stop-with-parent >"$WORK/kafka.address" 2>"$WORK/kafka.up" ||
    fail "cannot start a secure Kafka cluster of its own: $(cat "$WORK/kafka.up")"
  BROKERS=$(tail -n 1 "$WORK/kafka.address")
  ADMIN_CONFIG=$(kafka_tool user admin)
  export KPIPE_CONFIG="$ADMIN_CONFIG" KCAT_CONFIG="$ADMIN_CONFIG"
}

# registry_url: the Confluent-compatible URL of a Schema Registry
# (http://127.0.0.1:PORT/apis/ccompat/v7): the one scripts/registry runs
# with KPIPE_REGISTRY_STATE (ctest's fixture "registry" starts it for the
# schema_* tests), or, when that is unset (a test run by hand), one started
# for this test alone on the first call and stopped when the test ends.
# Tests share the fixture's registry: name subjects after `topic`.
registry_url() {
  local script="$KPIPE_SOURCE_DIR/scripts/registry"
  if [[ -n "${KPIPE_REGISTRY_STATE:-}" ]]; then
    "$script" address || fail "no Schema Registry is running (scripts/registry up, with this KPIPE_REGISTRY_STATE)"
    return
  fi
  local state="$WORK/registry"
  KPIPE_REGISTRY_STATE=$state "$script" address 2>/dev/null && return
  KPIPE_REGISTRY_STATE=$state "$script" up >/dev/null || fail "cannot start a Schema Registry (scripts/registry up)"
  cat "$state/url"
}

# kinesis_endpoint: the endpoint URL of a local Kinesis (kinesis-mock,
# http://127.0.0.1:PORT): the one scripts/kinesis runs with
# KPIPE_KINESIS_STATE (ctest's fixture "kinesis" starts it), or, when that
# is unset (a test run by hand), one started for this test alone on the
# first call and stopped when the test ends. Tests share the fixture's
# service: name streams after RUN_ID.
kinesis_endpoint() {
  local script="$KPIPE_SOURCE_DIR/scripts/kinesis"
  if [[ -n "${KPIPE_KINESIS_STATE:-}" ]]; then
    "$script" address || fail "no kinesis-mock is running (scripts/kinesis up, with this KPIPE_KINESIS_STATE)"
    return
  fi
  local state="$WORK/kinesis"
  KPIPE_KINESIS_STATE=$state "$script" address 2>/dev/null && return
  KPIPE_KINESIS_STATE=$state "$script" up >/dev/null || fail "cannot start kinesis-mock (scripts/kinesis up)"
  cat "$state/url"
}

# kinesis_client_env: kpipe's programs find region, endpoint and keys
# from the environment and the options alone, whatever the machine's
# ~/.aws says (kinesis-mock checks no signature: any keys do, kinesis_api's
# included). Sets AWS, the options that name the local Kinesis.
kinesis_client_env() {
  unset AWS_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_REGION AWS_ENDPOINT_URL AWS_ENDPOINT_URL_KINESIS \
    AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN
  export AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=secret AWS_REGION=us-east-1 \
    AWS_CONFIG_FILE="$WORK/aws-config" AWS_SHARED_CREDENTIALS_FILE="$WORK/aws-credentials" \
    AWS_EC2_METADATA_DISABLED=true
  AWS=(--endpoint "$KINESIS" --region us-east-1)
}

# kinesis_stream NAME SHARDS: makes the stream on the local Kinesis and
# waits until it is ACTIVE with SHARDS open shards; kinesis_is NAME "ACTIVE
# 3" tells whether it is so (after a split or a merge, say).
kinesis_stream() {
  kinesis_api CreateStream "$(jq -nc --arg s "$1" --argjson n "$2" '{StreamName: $s, ShardCount: $n}')" >/dev/null
  wait_for "$1 to be ACTIVE with $2 shards" 30 kinesis_is "$1" "ACTIVE $2"
}
kinesis_is() {
  [[ $(kinesis_api DescribeStreamSummary "$(jq -nc --arg s "$1" '{StreamName: $s}')" |
    jq -r '.StreamDescriptionSummary | "\(.StreamStatus) \(.OpenShardCount)"') == "$2" ]]
}

# kinesis_api ACTION JSON: one Kinesis API call (Kinesis_20131202.ACTION)
# to $KINESIS, the endpoint, signed with SigV4 by curl itself, as kpipe
# signs (kinesis-mock wants a signature but checks none: any keys do).
# Prints the answer; fails the test on any status but 200, naming it.
kinesis_api() {
  local action=$1 body=$2 status
  status=$(curl -s -m 10 -o "$WORK/kinesis.answer" -w '%{http_code}' \
    --aws-sigv4 "aws:amz:us-east-1:kinesis" --user AKIDEXAMPLE:secret \
    -H "X-Amz-Target: Kinesis_20131202.$action" -H 'Content-Type: application/x-amz-json-1.1' \
    -d "$body" "${KINESIS:?KINESIS must be the endpoint (kinesis_endpoint)}/") || status="curl failed ($?)"
  [[ "$status" == 200 ]] || fail "Kinesis $action: $status: $(head -c 500 "$WORK/kinesis.answer" 2>/dev/null)"
  cat "$WORK/kinesis.answer"
}

# kill_held_replay N ARGS...: kdlq replay ARGS into a stream, through a
# proxy in front of $KINESIS that forwards every call and holds its Nth
# PutRecords (the records written, the answer never given); once that is
# held, the replay is killed with SIGKILL, and the proxy stopped: a batch
# left in doubt, without a sleep or a race. Its output goes to
# $WORK/held.out and .err.
kill_held_replay() {
  local n=$1 hold proxy replay held
  shift
  rm -f "$WORK/hold.fifo"
  mkfifo "$WORK/hold.fifo"
  python3 "$KPIPE_SOURCE_DIR/tests/integration/bin/aws_standins.py" hold "$WORK/hold.log" "$KINESIS" \
    PutRecords "$n" >"$WORK/hold.fifo" 2>"$WORK/hold.err" &
  proxy=$!
  exec {hold}<"$WORK/hold.fifo"
  read -r -t 10 PROXY <&"$hold" || fail "the proxy did not start: $(cat "$WORK/hold.err")"
  kdlq replay "$@" --endpoint "$PROXY" --region us-east-1 >"$WORK/held.out" 2>"$WORK/held.err" &
  replay=$!
  read -r -t 60 held <&"$hold" ||
    fail "PutRecords $n was not held: $(cat "$WORK/held.err" "$WORK/hold.err")"
  [[ "$held" == "held PutRecords $n" ]] || fail "the proxy said '$held'"
  {
    kill -KILL "$replay"
    wait "$replay" || true
    kill "$proxy"
    wait "$proxy" || true
  } 2>/dev/null
  exec {hold}<&-
}

# describe_group GROUP: Kafka's own view of a group's committed offsets, one
# "TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG" line per partition,
# sorted (real Kafka only: kbroker has no group describe).
describe_group() {
  kafka_tool groups --describe --group "$1" >"$WORK/describe.out" 2>"$WORK/describe.err" ||
    fail "kafka-consumer-groups --describe --group $1 failed: $(cat "$WORK/describe.err")"
  awk '$1 == G && NF >= 6 { print $2, $3, $4, $5, $6 }' G="$1" "$WORK/describe.out" | sort -k1,1 -k2,2n
}

# no_member GROUP: Kafka says GROUP has no member (real Kafka only). A
# static member that closed in the middle of a rebalance did not leave: it
# holds its partitions until its session times out.
no_member() {
  kafka_tool groups --describe --group "$1" --members 2>&1 | grep -q "has no active members"
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

# wait_stopped DESCRIPTION SECONDS SESSION: until no process of SESSION
# runs, or fails the test after SECONDS naming the programs still running,
# each one's threads' stacks on standard error first where gdb is there
# (a hang in CI is then told by its output alone).
wait_stopped() {
  local what=$1 limit=$2 session=$3
  local deadline=$((SECONDS + limit))
  while ps -o stat= -s "$session" | grep -qv '^Z'; do
    if ((SECONDS >= deadline)); then
      show_stacks "$session"
      fail "timed out after ${limit}s waiting for $what; still running: $(ps -o comm= -s "$session" | grep -v '^bash$' | tr '\n' ' ')"
    fi
    sleep 0.05
  done
}

# show_stacks SESSION: the stacks of SESSION's programs (not its shells),
# the first frames of each thread, on standard error; nothing without gdb.
show_stacks() {
  command -v gdb >/dev/null || return 0
  local pid comm
  while read -r pid comm; do
    [[ $comm != bash ]] || continue
    echo "--- $comm (pid $pid):" >&2
    timeout 20 gdb -batch -p "$pid" -ex 'thread apply all bt 12' 2>/dev/null |
      grep -E '^(Thread|#)' | cut -c1-160 | head -80 >&2 || true
  done < <(ps -o pid=,comm= -s "$1")
}

# --- crash tests ------------------------------------------------------------------
# A crash test writes its pipeline as a script, $WORK/pipeline.sh, with
# bin/kill_after_checkpoints after kconsume logging to $WORK/killed, and
# keeps its state in $S.

# run_pipeline ARGS...: starts $WORK/pipeline.sh in a session of its own,
# so that one SIGKILL reaches every stage; PIPELINE is the session (killed
# when the test ends).
run_pipeline() {
  setsid bash "$WORK/pipeline.sh" "$@" &
  PIPELINE=$!
}

# start_session SCRIPT ARGS...: runs bash SCRIPT ARGS in a session of its
# own (one signal reaches all its processes; killed when the test ends);
# SESSION is its id.
start_session() {
  setsid bash "$@" &
  SESSION=$!
  SESSIONS+=("$SESSION")
}

# completed [STORE]: the newest complete checkpoint's id in STORE (default
# $S; ids grow, the oldest are pruned, so a count stops at about a thousand).
completed() { sql "${1:-$S}" "SELECT COALESCE(MAX(id), 0) FROM checkpoints WHERE completed_at IS NOT NULL" 2>/dev/null || echo 0; }

# consumed [--readonly] [STORE]: the records every partition's newest
# complete checkpoint covers in STORE (default $S): the sum of its stored
# offsets, 0 before the first or while the store cannot be read.
consumed() {
  local args=()
  [[ "${1:-}" != --readonly ]] || { args+=(--readonly); shift; }
  sql "${args[@]}" "${1:-$S}" 'SELECT COALESCE(SUM("offset"), 0) FROM offsets' 2>/dev/null || echo 0
}

# wait_checkpoints N: until checkpoint N is complete, or the pipeline has
# killed itself (on records left from the round before: $WORK/killed has
# more lines than killed_before).
wait_checkpoints() {
  local deadline=$((SECONDS + 120))
  while (($(completed) < $1)); do
    if ! kill -0 "$PIPELINE" 2>/dev/null; then
      (($(lines "$WORK/killed") > killed_before)) && return
      fail "the pipeline ended before it was killed: $(cat "$WORK"/*.err)"
    fi
    ((SECONDS < deadline)) || fail "no checkpoint completed in 120 s: $(cat "$WORK"/*.err)"
    sleep 0.02 # polling the state: there is nothing to wait on
  done
}

# pipeline_gone: no process of the pipeline's session is left (zombies
# aside), so that nothing more reaches the output.
pipeline_gone() { [[ -z "$(ps -o stat= -s "$PIPELINE" | grep -v '^Z')" ]]; }

# cut_torn_line FILE: drops an incomplete last line. SIGKILL can stop a
# write to a regular file part way (Linux checks for a fatal signal between
# pages), so a killed terminal stage may leave half a line; its records come
# again from the next run, as all after the newest complete checkpoint do
# (kpipe(7), CONTROL LINES AND CHECKPOINTS). Prints the bytes it cut.
cut_torn_line() {
  local f=$1 size last
  [[ -s "$f" && "$(tail -c 1 "$f" | od -An -tx1 | tr -d ' ')" != 0a ]] || { echo 0; return; }
  size=$(wc -c <"$f") last=$(tail -n 1 "$f" | wc -c)
  truncate -s $((size - last)) "$f"
  echo "$last"
}

# lines FILE: its number of lines (0 when it does not exist yet).
lines() { if [[ -f "$1" ]]; then wc -l <"$1"; else echo 0; fi; }

# has_at_least FILE N: FILE has N lines or more (for wait_for).
has_at_least() { (($(lines "$1") >= $2)); }

# complete FILE: the complete lines of a file a program is still writing
# (its last line may be half written).
complete() { head -n "$(lines "$1")" "$1"; }

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

# --- kbroker faults on demand (kbroker(1), FAULTS) --------------------------------
# Added for the fault tests (fault_*.sh); kbroker only.

# start_fault_broker BROKERS NAME:PARTITIONS...: like start_broker, but a
# cluster of BROKERS brokers that takes fault commands on $WORK/control.
# kbroker's answers are read from $KBROKER_OUT, which stays open for `fault`.
start_fault_broker() {
  local n=$1 specs=() spec
  shift
  requires_broker kbroker "faults on demand are kbroker's (--control)"
  for spec in "$@"; do specs+=(--topic "$(topic "${spec%%:*}"):${spec##*:}"); done
  mkfifo "$WORK/control"
  start_test_kbroker --brokers "$n" "${specs[@]}" --control "$WORK/control"
}

# fault_answer COMMAND...: sends one command to kbroker and prints its
# answer ("ok COMMAND" once applied, or "error: ...").
fault_answer() {
  local answer
  # A FIFO without its reader would block the writer for good.
  kill -0 "$BROKER_PID" 2>/dev/null || fail "kbroker is gone: $(cat "$WORK/kbroker.err")"
  echo "$*" >"$WORK/control"
  read -r -t 30 answer <&"$KBROKER_OUT" || fail "kbroker did not answer '$*'"
  echo "$answer"
}

# fault COMMAND...: sends one command, and fails the test unless kbroker
# applied it. Once this returns, the fault is in place.
fault() {
  local answer
  answer=$(fault_answer "$@")
  [[ "$answer" == "ok $*" ]] || fail "kbroker refused '$*': $answer"
}
# --- end of kbroker faults --------------------------------------------------------

# --- disk faults (tests/integration/disk_full.sh, db_faults.sh, output_full.sh) ---
# private_mounts: runs the rest of the test in a mount namespace of its
# own, so that the file systems it mounts (small_disk) are its alone and go
# when it ends; or skips it (exit 77), saying why, where none can be made
# (not root, no unshare(1)). Call it first: the test starts again inside.
private_mounts() {
  [[ -z "${KPIPE_TEST_PRIVATE_MOUNTS:-}" ]] || return 0
  local why=""
  if ((EUID != 0)); then
    why="mounting a small file system needs root"
  elif ! command -v unshare >/dev/null; then
    why="unshare(1) is missing"
  elif ! unshare -m --propagation private true 2>/dev/null; then
    why="cannot make a mount namespace (unshare -m refused)"
  fi
  # Nothing was started yet: this $WORK goes (inside, the test makes its own).
  trap - EXIT
  rm -rf "$WORK"
  if [[ -n "$why" ]]; then
    echo "SKIP: $TEST_NAME: $why"
    exit 77
  fi
  KPIPE_TEST_PRIVATE_MOUNTS=1 exec unshare -m --propagation private bash "$0" "$@"
}

# small_disk DIR SIZE: a tmpfs of SIZE (mount's size=, e.g. 4m) on DIR,
# created; skips the test (exit 77) if it cannot be mounted. Needs
# private_mounts first. Unmounted when the test ends, before $WORK goes.
SMALL_DISKS=()
small_disk() {
  mkdir -p "$1"
  mount -t tmpfs -o "size=$2,mode=0700" tmpfs "$1" 2>"$WORK/mount.err" || {
    echo "SKIP: $TEST_NAME: cannot mount a tmpfs: $(cat "$WORK/mount.err")"
    exit 77
  }
  SMALL_DISKS+=("$1")
  # cleanup reads the test's status from $?: the if gives it back.
  trap 'small_disks_status=$?; for d in "${SMALL_DISKS[@]}"; do umount -l "$d" || true; done
        if (exit $small_disks_status); then cleanup; else cleanup; fi' EXIT
}

# fill_disk DIR: fills DIR's file system to the last block with DIR/filler;
# rm it to free the space again.
fill_disk() {
  cat /dev/zero >>"$1/filler" 2>/dev/null && fail "$1/filler: the disk never filled"
  [[ $(df --output=avail "$1" | tail -1 | tr -d ' ') == 0 ]] || fail "$1 is not full: $(df "$1" | tail -1)"
}
# --- end of disk faults ---

# --- instances (kpipe(7), MANY INSTANCES) -------------------------------------------
# A test of many instances writes one instance as $WORK/instance.sh NAME
# ARGS... (its diagnostics in $WORK/NAME.err) and keeps the shared state in
# $S; `start NAME` runs it in a session of its own.
declare -A sessions
start() {
  start_session "$WORK/instance.sh" "$1"
  sessions[$1]=$SESSION
}
# The pid of NAME's PROGRAM (kconsume by default).
instance_pid() { pgrep -s "${sessions[$1]}" -x "${2:-kconsume}" || true; }
# owns NAME: how many partitions the store says NAME's kconsume owns.
owns() {
  local pid
  pid=$(instance_pid "$1")
  [[ -n "$pid" ]] || { echo 0; return; }
  sql "$S" "SELECT COUNT(*) FROM partition_owners WHERE pid = $pid" 2>/dev/null || echo 0
}
has_partitions() { (($(owns "$1") > 0)); }
gone() { [[ -z "$(ps -o stat= -s "${sessions[$1]}" | grep -v '^Z')" ]]; }
# Partitions whose owner in the store is no process alive: a stopped or
# killed instance's, not yet taken over.
orphans() {
  local n=0 pid
  while read -r pid; do
    [[ -n "$pid" ]] || continue
    kill -0 "$pid" 2>/dev/null || n=$((n + 1))
  done < <(sql "$S" "SELECT pid FROM partition_owners" 2>/dev/null)
  echo "$n"
}
# no_orphans N: all N partitions owned, each by a live process.
no_orphans() { (($(orphans) == 0)) && (($(sql "$S" "SELECT COUNT(*) FROM partition_owners") == $1)); }
stop() {
  kill -TERM "$(instance_pid "$1")" 2>/dev/null || true
  wait_stopped "instance $1 to stop" 60 "${sessions[$1]}"
}
kill_instance() {
  kill -KILL -- "-${sessions[$1]}" 2>/dev/null || true
  wait_for "instance $1 to die" 30 gone "$1"
}
# assert_exactly_once SOURCE OUTPUT TOTAL: a pipeline of kdedup -k
# .value.event_id into kproduce --envelope --keep-partition --transactional
# wrote, in each partition of OUTPUT, the records of SOURCE's partition with
# repeated event ids dropped, each once and in SOURCE's order, as a
# read_committed reader sees them ($WORK/want and $WORK/got: PARTITION ID
# lines). A repeated event is in its original's partition (keyed by user),
# and more than 95% of TOTAL are distinct.
assert_exactly_once() {
  local by_partition='"\(.partition) \(.value.event_id)"'
  kconsume -b "$BROKERS" -t "$1" -e 2>/dev/null | jq -r "$by_partition" | awk '!seen[$2]++' |
    sort -s -k1,1n >"$WORK/want"
  kconsume -b "$BROKERS" -t "$2" -e 2>/dev/null | jq -r "$by_partition" | sort -s -k1,1n >"$WORK/got"
  (($(wc -l <"$WORK/want") > $3 * 95 / 100)) || fail "the reference has only $(wc -l <"$WORK/want") events"
  assert_files_equal "$WORK/want" "$WORK/got"
}
