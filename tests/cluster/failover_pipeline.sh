#!/usr/bin/env bash
# An exactly-once pipeline into a table, the README's without its window
#   kconsume -g G --state S | kdedup --state S | kupsert --db S --state S
# on a cluster of three brokers (replication factor 3, min.insync.replicas=2,
# SASL_SSL, ACLs), as a principal holding only the ACLs kpipe(7) SECURITY
# lists, while the leader of source partition 0 (and of output partitions)
# is killed with SIGKILL, and then while every broker is restarted in turn (a rolling
# restart). The table holds each distinct event once, at the position of
# its first occurrence in the source, and kcheckpoint sync then commits the
# source's end to a group.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/lib/faults.sh"
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
run_faults

# Each distinct event once, at its first occurrence's position.
kconsume -t "$SRC" -e | jq -r '[.partition, .offset, .value.event_id] | @tsv' |
  sort -n -k1,1 -k2,2 | awk '!seen[$3]++' >"$WORK/want"
sql "$S" "select partition, \"offset\", json_extract(value, '$.event_id') from events order by 1, 2" |
  tr '|' '\t' >"$WORK/table"
assert_eq "$(lines "$WORK/want")" "$(jq -r .event_id "$WORK/events.ndjson" | sort -u | wc -l)" "distinct events in the source"
assert_files_equal "$WORK/want" "$WORK/table"
expect_exit 0 kcheckpoint verify --state "$S"

# kcheckpoint sync, on the cluster the faults left (a leader for every
# partition again): the state's offsets, committed to a group of their
# own, are the source's end, as Kafka itself says.
M=$(group mirror)
expect_exit 0 kcheckpoint sync --state "$S" --to-group "$M"
describe_group "$M" >"$WORK/mirror"
assert_eq "$(lines "$WORK/mirror")" 6 "partitions kcheckpoint sync committed"
awk '$3 != $4 || $5 != 0 { bad = 1 } END { exit bad }' "$WORK/mirror" ||
  fail "kcheckpoint sync did not commit the source's end: $(cat "$WORK/mirror")"
echo "PASS: $TEST_NAME"
