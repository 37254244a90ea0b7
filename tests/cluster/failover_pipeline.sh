#!/usr/bin/env bash
# An exactly-once pipeline into a table, the README's without its window
#   kconsume -g G --state S | kdedup --state S | kupsert --db S --state S
# on a cluster of three brokers (replication factor 3, min.insync.replicas=2,
# SASL_SSL, ACLs), as a principal holding only the ACLs kpipe(7) SECURITY
# lists, while the leader of source partition 0 (and of output partitions)
# is killed with SIGKILL, and then while every broker is restarted in turn (a rolling
# restart). The table holds each distinct event once, at the position of
# its first occurrence in the source.
source "$(dirname "$0")/../integration/lib.sh"
start_broker events:6
SRC=$(topic events)
G=$(group pipeline)
S=$(store state)
seed=${KPIPE_CRASH_SEED:-$RANDOM}
echo "failover_pipeline seed: $seed (rerun with KPIPE_CRASH_SEED=$seed)"

# The pipeline's principal, with exactly kpipe(7) SECURITY's ACLs for
# kconsume -g.
P=$(kafka_tool user pipe)
acl() { kafka_tool acls --add --allow-principal User:pipe "$@" >/dev/null || fail "cannot grant $*"; }
acl --operation Read --topic "$SRC"
acl --operation Read --group "$G"

# 60k events, 3% repeats, keyed by user, in five slices produced one by
# one as the faults go (by the admin: its kproduce is not under test here).
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 60000 -k 200 -r 0.03 -s "$seed" >"$WORK/events.ndjson"
split -n l/5 -d "$WORK/events.ndjson" "$WORK/slice."
feed() {
  expect_exit 0 kproduce -t "$SRC" -k .user_id "$WORK/slice.0$1"
  fed+=" $WORK/slice.0$1"
}

cat >"$WORK/pipeline.sh" <<PIPE
#!/usr/bin/env bash
kconsume --config "$P" -t "$SRC" -g "$G" --state "$S" --checkpoint-interval 200ms 2>>"$WORK/consume.err" |
  kdedup --key .value.event_id --state "$S" 2>>"$WORK/dedup.err" |
  kupsert --db "$S" --table events --key topic,partition,offset --state "$S" 2>>"$WORK/upsert.err"
PIPE

# Until the table holds every distinct event fed so far; fails at once if
# the pipeline died. (Polling the store: nothing else says when kupsert
# has committed.)
fed=""
caught_up() {
  kill -0 "$PIPELINE" 2>/dev/null || fail "the pipeline ended: $(cat "$WORK"/*.err)"
  [[ $(sql "$S" "select count(*) from events" 2>/dev/null) == "$(cat $fed | jq -r .event_id | sort -u | wc -l)" ]]
}
# through WHAT STARTED: waits until the pipeline caught up; says how long
# it took from STARTED (a fault) on.
through() {
  wait_for "the pipeline to catch up $1" 240 caught_up
  echo "caught up $1 $((SECONDS - $2))s after it" >&2
}
feed 0
run_pipeline
through "before any fault" 0

# The leader of source partition 0 dies (and the coordinators it was).
# One broker of three: with two gone,
# min.insync.replicas=2 rightly refuses every write.
dead=$(kafka_tool leader "$SRC" 0)
t=$SECONDS
kafka_tool crash "$dead" 2>/dev/null
feed 1
through "with broker $dead killed" "$t"
kafka_tool restart "$dead" >/dev/null 2>&1 || fail "broker $dead did not come back"

# A rolling restart: each broker killed and started again in turn, a slice
# of events fed while it is down.
for b in 1 2 3; do
  t=$SECONDS
  kafka_tool crash "$b" 2>/dev/null
  feed $((b + 1))
  through "with broker $b killed" "$t"
  kafka_tool restart "$b" >/dev/null 2>&1 || fail "broker $b did not come back"
done
through "after the rolling restart" "$t"

# Stopped as systemd stops it.
kill -TERM -- -"$PIPELINE"
wait_for "the pipeline to stop" 60 pipeline_gone
PIPELINE=""
grep -v 'warning' "$WORK"/*.err | grep -q . && fail "the pipeline said: $(cat "$WORK"/*.err)"
sed 's/^/  /' "$WORK"/*.err >&2

# Each distinct event once, at its first occurrence's position.
kconsume -t "$SRC" -e | jq -r '[.partition, .offset, .value.event_id] | @tsv' |
  sort -n -k1,1 -k2,2 | awk '!seen[$3]++' >"$WORK/want"
sql "$S" "select partition, \"offset\", json_extract(value, '$.event_id') from events order by 1, 2" |
  tr '|' '\t' >"$WORK/table"
assert_eq "$(lines "$WORK/want")" "$(jq -r .event_id "$WORK/events.ndjson" | sort -u | wc -l)" "distinct events in the source"
assert_files_equal "$WORK/want" "$WORK/table"
expect_exit 0 kcheckpoint verify --state "$S"
echo "PASS: $TEST_NAME"
