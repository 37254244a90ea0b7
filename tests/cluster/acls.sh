#!/usr/bin/env bash
# Least privilege (kpipe(7), SECURITY): each program and mode runs under a
# principal holding exactly the ACLs kpipe(7) lists for it, and works; with
# one of them taken away, it stops within --timeout with exit 1 and one
# line naming the operation and the resource refused and the ACL needed,
# never a retry to the timeout and never a hang. Against a secure Kafka of
# its own (SASL_SSL, SCRAM-SHA-512, the StandardAuthorizer; admin the super
# user, which makes the topics and the data).
source "$(dirname "$0")/../integration/lib.sh"

own_cluster 1
start_broker src:2 out:1 dead:1 target:1 table:1
SRC=$(topic src) OUT=$(topic out) DEAD=$(topic dead) TARGET=$(topic target) TABLE=$(topic table)
# The timeout every refused run is given, and the bound it must end within:
# the timeout and a margin for a loaded machine. A bound, not a wait.
TIMEOUT=5s LIMIT_MS=8000

# grant USER ARGS... / revoke USER ARGS...: kafka-acls --add / --remove for
# User:USER (--operation OP --topic T ...). kafka-acls lists the resource's
# ACLs after the change, as the broker that authorizes sees them: the change
# must show there (so the next run meets it), else the test fails.
acl_change() {
  local change=$1 user=$2
  shift 2
  local ops=() args=("$@") i
  for ((i = 0; i < ${#args[@]}; i++)); do
    [[ ${args[i]} != --operation ]] || ops+=("$(tr '[:lower:]' '[:upper:]' <<<"${args[i + 1]}")")
  done
  local extra=()
  [[ $change != remove ]] || extra=(--force)
  kafka_tool acls "--$change" "${extra[@]}" --allow-principal "User:$user" "$@" >"$WORK/acl.out" 2>&1 ||
    fail "kafka-acls --$change User:$user $*: $(cat "$WORK/acl.out")"
  local op listed
  for op in "${ops[@]}"; do
    listed=0
    grep -qF "(principal=User:$user, host=*, operation=$op, permissionType=ALLOW)" "$WORK/acl.out" || listed=$?
    if [[ $change == add ]]; then
      ((listed == 0)) || fail "kafka-acls does not list $op for User:$user after adding it: $(cat "$WORK/acl.out")"
    else
      ((listed != 0)) || fail "kafka-acls still lists $op for User:$user after removing it: $(cat "$WORK/acl.out")"
    fi
  done
}
grant() { acl_change add "$@"; }
revoke() { acl_change remove "$@"; }

# user NAME: a SCRAM user with no ACL yet; prints its client file.
user() { kafka_tool user "$1" || fail "cannot make user $1"; }

# works WHAT CMD...: CMD exits 0 (stdout in $WORK/out, stderr in $WORK/err).
works() {
  local what=$1
  shift
  expect_exit 0 timeout 60 "$@"
  grep -q 'not authorized' "$WORK/err" && fail "$what: $(cat "$WORK/err")"
  return 0
}

# refused LINE CMD...: CMD, given --timeout $TIMEOUT, exits 1 within
# LIMIT_MS with LINE, and only LINE, on stderr. The time is noted.
refused() {
  local want=$1
  shift
  local rc=0 start end ms
  start=$(date +%s%N)
  timeout 60 "$@" </dev/null >"$WORK/out" 2>"$WORK/err" || rc=$?
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  ((rc == 1)) || fail "'$*' exited $rc, not 1: $(head -c 1000 "$WORK/err")"
  assert_eq "$(cat "$WORK/err")" "$want" "stderr of '$*'"
  ((ms < LIMIT_MS)) || fail "'$*' took $ms ms: not within --timeout $TIMEOUT (and a margin)"
  echo "$ms ms: $want" >>"$WORK/times"
}

# --- the data, written by admin (KPIPE_CONFIG) -------------------------------------
# Five records in each partition: every group below commits on both.
jq -nc 'range(10) | {n: .}' >"$WORK/src.ndjson"
head -5 "$WORK/src.ndjson" >"$WORK/src0.ndjson"
tail -5 "$WORK/src.ndjson" >"$WORK/src1.ndjson"
expect_exit 0 kproduce -t "$SRC" -p 0 "$WORK/src0.ndjson"
expect_exit 0 kproduce -t "$SRC" -p 1 "$WORK/src1.ndjson"
printf '%s\n' '{"id":"u1","name":"ann"}' '{"id":"u2","name":"bob"}' >"$WORK/table.ndjson"
expect_exit 0 kproduce -t "$TABLE" --key .id "$WORK/table.ndjson"

# --- kconsume without a group: Read on the topic -------------------------------------
C=$(user reader)
grant reader --operation Read --topic "$SRC"
works "kconsume" kconsume --config "$C" -t "$SRC" -e --timeout "$TIMEOUT"
assert_eq "$(lines "$WORK/out")" 10 "records kconsume read"
revoke reader --operation Read --topic "$SRC"
refused "kconsume: error: not authorized to read topic '$SRC' (ACL needed: Read on Topic:$SRC)" \
  kconsume --config "$C" -t "$SRC" -e --timeout "$TIMEOUT"

# --- kconsume -g: Read on the topic and on the group ------------------------------------
G=$(group clicks)
C=$(user consumer)
grant consumer --operation Read --topic "$SRC" --group "$G"
works "kconsume -g" kconsume --config "$C" -t "$SRC" -g "$G" -e --timeout "$TIMEOUT"
assert_eq "$(lines "$WORK/out")" 10 "records kconsume -g read"
revoke consumer --operation Read --group "$G"
refused "kconsume: error: not authorized to read group '$G' (ACL needed: Read on Group:$G)" \
  kconsume --config "$C" -t "$SRC" -g "$G" -e --timeout "$TIMEOUT"
grant consumer --operation Read --group "$G"
revoke consumer --operation Read --topic "$SRC"
refused "kconsume: error: not authorized to read topic '$SRC' (ACL needed: Read on Topic:$SRC)" \
  kconsume --config "$C" -t "$SRC" -g "$G" -e --timeout "$TIMEOUT"

# --- kproduce: Write on the topic (Describe implied; the idempotent producer's
# id too, from Kafka 2.8 on) -------------------------------------------------------------
W=$(user writer)
grant writer --operation Write --topic "$OUT"
works "kproduce" kproduce --config "$W" -t "$OUT" --timeout "$TIMEOUT" "$WORK/src.ndjson"
revoke writer --operation Write --topic "$OUT"
refused "kproduce: error: not authorized to write topic '$OUT' (ACL needed: Write on Topic:$OUT)" \
  kproduce --config "$W" -t "$OUT" --timeout "$TIMEOUT" "$WORK/src.ndjson"
# Describe alone: the topic is seen, and the producer's id is refused.
grant writer --operation Describe --topic "$OUT"
refused "kproduce: error: not authorized to write topic '$OUT' (ACL needed: Write on Topic:$OUT)" \
  kproduce --config "$W" -t "$OUT" --timeout "$TIMEOUT" "$WORK/src.ndjson"
revoke writer --operation Describe --topic "$OUT"

# --- kproduce --dlq kafka:TOPIC: Write on the dead-letter topic too ----------------------------
grant writer --operation Write --topic "$OUT" --topic "$DEAD"
printf '%s\n' '{"ok":1}' '{"broken":' >"$WORK/lines.ndjson"
works "kproduce --dlq" kproduce --config "$W" -t "$OUT" --dlq "kafka:$DEAD" --timeout "$TIMEOUT" "$WORK/lines.ndjson"
assert_contains "$WORK/err" "sent 1 line to the dead-letter store kafka:$DEAD"
revoke writer --operation Write --topic "$DEAD"
refused "kproduce: error: dead-letter store 'kafka:$DEAD': not authorized to write topic '$DEAD' (ACL needed: Write on Topic:$DEAD)" \
  kproduce --config "$W" -t "$OUT" --dlq "kafka:$DEAD" --timeout "$TIMEOUT" "$WORK/lines.ndjson"

# --- kproduce --transactional: Write on the topic and on its transactional id
# (kpipe-TOPIC-..., granted by prefix), Read on kconsume's group and topic (the
# offsets it commits) -------------------------------------------------------------------
G2=$(group tx)
S=$(store tx)
expect_exit 0 kconsume -t "$SRC" -g "$G2" --state "$S" -e
# Replayed later, after that kconsume left the group: without the member
# its lines carry, which the group would rightly refuse as a zombie's
# (kpipe(7), MANY INSTANCES); what is tested here is the ACLs.
jq -c 'del(.member)' "$WORK/out" >"$WORK/tx.ndjson"
T=$(user txn)
grant txn --operation Write --topic "$OUT"
grant txn --operation Write --transactional-id "kpipe-$OUT-" --resource-pattern-type prefixed
grant txn --operation Read --topic "$SRC" --group "$G2"
# Each refusal first: the checkpoint stays to be committed.
revoke txn --operation Read --group "$G2"
refused "kproduce: error: not authorized to read group '$G2' (ACL needed: Read on Group:$G2) (the transaction was aborted)" \
  kproduce --config "$T" -t "$OUT" --transactional --state "$S" --timeout "$TIMEOUT" "$WORK/tx.ndjson"
grant txn --operation Read --group "$G2"
revoke txn --operation Read --topic "$SRC"
refused "kproduce: error: not authorized to read topic '$SRC' (ACL needed: Read on Topic:$SRC) (the transaction was aborted)" \
  kproduce --config "$T" -t "$OUT" --transactional --state "$S" --timeout "$TIMEOUT" "$WORK/tx.ndjson"
grant txn --operation Read --topic "$SRC"
revoke txn --operation Write --transactional-id "kpipe-$OUT-" --resource-pattern-type prefixed
refused_id() {
  local rc=0
  kproduce -v --config "$T" -t "$OUT" --transactional --state "$S" --timeout "$TIMEOUT" "$WORK/tx.ndjson" \
    </dev/null >/dev/null 2>"$WORK/id.err" || rc=$?
  sed -n "s/^kproduce: transactional id '\(.*\)'\$/\1/p" "$WORK/id.err"
}
ID=$(refused_id)
[[ $ID == "kpipe-$OUT-"* ]] || fail "kproduce's transactional id '$ID' is not kpipe-$OUT-...: $(cat "$WORK/id.err")"
refused "kproduce: error: not authorized to use transactional id '$ID' (ACL needed: Write on TransactionalId:$ID)" \
  kproduce --config "$T" -t "$OUT" --transactional --state "$S" --timeout "$TIMEOUT" "$WORK/tx.ndjson"
grant txn --operation Write --transactional-id "kpipe-$OUT-" --resource-pattern-type prefixed
revoke txn --operation Write --topic "$OUT"
refused "kproduce: error: not authorized to write topic '$OUT' (ACL needed: Write on Topic:$OUT)" \
  kproduce --config "$T" -t "$OUT" --transactional --state "$S" --timeout "$TIMEOUT" "$WORK/tx.ndjson"
grant txn --operation Write --topic "$OUT"
works "kproduce --transactional" kproduce -v --config "$T" -t "$OUT" --transactional --state "$S" --timeout "$TIMEOUT" "$WORK/tx.ndjson"
grep -qE "^kproduce: committed [1-9][0-9]* transactions? of 10 records to '$OUT'\$" "$WORK/err" ||
  fail "kproduce --transactional did not commit the 10 records: $(cat "$WORK/err")"

# --- klag: Describe on the group, Read on its topics (a record of each lagging
# partition is read for the lag in seconds) ---------------------------------------------
expect_exit 0 kproduce -t "$SRC" -p 0 "$WORK/src.ndjson" # G lags by 10 now
L=$(user lagger)
grant lagger --operation Describe --group "$G"
grant lagger --operation Read --topic "$SRC"
works "klag" klag --config "$L" -g "$G" --format ndjson --timeout "$TIMEOUT"
assert_eq "$(jq -s 'map(select(.partition != null) | .lag) | add' "$WORK/out")" 10 "klag's lag"
revoke lagger --operation Describe --group "$G"
refused "klag: error: not authorized to describe group '$G' (ACL needed: Describe on Group:$G)" \
  klag --config "$L" -g "$G" --format ndjson --timeout "$TIMEOUT"
grant lagger --operation Describe --group "$G"
revoke lagger --operation Read --topic "$SRC"
refused "klag: error: not authorized to read topic '$SRC' (ACL needed: Read on Topic:$SRC)" \
  klag --config "$L" -g "$G" -t "$SRC" --format ndjson --timeout "$TIMEOUT"
grant lagger --operation Describe --topic "$SRC"
refused "klag: error: not authorized to read topic '$SRC' (ACL needed: Read on Topic:$SRC)" \
  klag --config "$L" -g "$G" --format ndjson --timeout "$TIMEOUT"

# --- kcheckpoint sync: --to-group Read on the group and the topics; --from-group
# Describe on them ---------------------------------------------------------------------------
G3=$(group sync)
S3=$(store sync)
kconsume -t "$SRC" -e --state "$S3" | kcheckpoint commit --state "$S3" --passthrough >/dev/null
Y=$(user syncer)
grant syncer --operation Read --topic "$SRC" --group "$G3"
works "kcheckpoint sync --to-group" kcheckpoint sync --config "$Y" --state "$S3" --to-group "$G3" --timeout "$TIMEOUT"
revoke syncer --operation Read --group "$G3"
refused "kcheckpoint: error: not authorized to read group '$G3' (ACL needed: Read on Group:$G3)" \
  kcheckpoint sync --config "$Y" --state "$S3" --to-group "$G3" --timeout "$TIMEOUT"
revoke syncer --operation Read --topic "$SRC"
S4=$(store from)
expect_exit 0 kcheckpoint import --state "$S4" /dev/null
grant syncer --operation Describe --topic "$SRC" --group "$G3"
works "kcheckpoint sync --from-group" kcheckpoint sync --config "$Y" --state "$S4" --from-group "$G3" -t "$SRC" --timeout "$TIMEOUT"
revoke syncer --operation Describe --group "$G3"
refused "kcheckpoint: error: not authorized to describe group '$G3' (ACL needed: Describe on Group:$G3)" \
  kcheckpoint sync --config "$Y" --state "$S4" --from-group "$G3" -t "$SRC" --timeout "$TIMEOUT"

# --- kdlq with a kafka: store: list Read on the topic and Describe on its replay
# group; replay --to kafka:T Read on the group and Write on T; purge Delete on
# the topic ------------------------------------------------------------------------------------
R="kdlq-replay.$DEAD"
D=$(user dlq)
grant dlq --operation Read --topic "$DEAD"
grant dlq --operation Describe --group "$R"
works "kdlq list" kdlq list --config "$D" --dlq "kafka:$DEAD" --format ndjson --timeout "$TIMEOUT"
assert_eq "$(jq -r .payload "$WORK/out")" '{"broken":' "the dead letter kdlq list read"
revoke dlq --operation Describe --group "$R"
refused "kdlq: error: not authorized to describe group '$R' (ACL needed: Describe on Group:$R)" \
  kdlq list --config "$D" --dlq "kafka:$DEAD" --timeout "$TIMEOUT"
grant dlq --operation Read --group "$R"
grant dlq --operation Write --topic "$TARGET"
works "kdlq replay" kdlq replay --config "$D" --dlq "kafka:$DEAD" --to "kafka:$TARGET" --timeout "$TIMEOUT"
revoke dlq --operation Write --topic "$TARGET"
refused "kdlq: error: replay target 'kafka:$TARGET': not authorized to write topic '$TARGET' (ACL needed: Write on Topic:$TARGET)" \
  kdlq replay --config "$D" --dlq "kafka:$DEAD" --to "kafka:$TARGET" --timeout "$TIMEOUT"
refused "kdlq: error: not authorized to delete records of topic '$DEAD' (ACL needed: Delete on Topic:$DEAD)" \
  kdlq purge --replayed --config "$D" --dlq "kafka:$DEAD" --timeout "$TIMEOUT"
grant dlq --operation Delete --topic "$DEAD"
works "kdlq purge" kdlq purge --replayed --config "$D" --dlq "kafka:$DEAD" --timeout "$TIMEOUT"
assert_eq "$(cat "$WORK/out")" "purged 1 entry from kafka:$DEAD" "kdlq purge"

# --- kjoin --table kafka:TOPIC: Read on the table topic -------------------------------------
J=$(user joiner)
printf '%s\n' '{"user_id":"u1"}' '{"user_id":"u3"}' >"$WORK/clicks.ndjson"
grant joiner --operation Read --topic "$TABLE"
works "kjoin" kjoin --config "$J" --table "kafka:$TABLE" --key .user_id --as .user --timeout "$TIMEOUT" "$WORK/clicks.ndjson"
assert_eq "$(jq -c .user "$WORK/out" | paste -sd' ')" '{"id":"u1","name":"ann"} null' "kjoin's rows"
revoke joiner --operation Read --topic "$TABLE"
refused "kjoin: error: not authorized to read topic '$TABLE' (ACL needed: Read on Topic:$TABLE)" \
  kjoin --config "$J" --table "kafka:$TABLE" --key .user_id --as .user --timeout "$TIMEOUT" "$WORK/clicks.ndjson"

sort -n "$WORK/times" | sed 's/^/  /' >&2
echo "PASS: $TEST_NAME"
