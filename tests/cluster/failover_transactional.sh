#!/usr/bin/env bash
# The README's exactly-once Kafka-to-Kafka pipeline
#   kconsume -g G --state S | kdedup --state S | kproduce --transactional --state S
# on a cluster of three brokers (replication factor 3, min.insync.replicas=2,
# SASL_SSL, ACLs), as a principal holding only the ACLs kpipe(7) SECURITY
# lists, while the leader of source partition 0 (and of output partitions)
# is killed with SIGKILL, and then while every broker is restarted in turn (a rolling
# restart). A read_committed reader of the output sees each distinct event
# exactly once, each partition in its source order; the group has no lag,
# as Kafka and klag both say.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/lib/faults.sh"
start_broker events:6 clean:6
SRC=$(topic events)
OUT=$(topic clean)
G=$(group pipeline)
S=$(store state)
seed=${KPIPE_CRASH_SEED:-$RANDOM}
echo "failover_transactional seed: $seed (rerun with KPIPE_CRASH_SEED=$seed)"

# The pipeline's principal, with exactly kpipe(7) SECURITY's ACLs for
# kconsume -g and kproduce --transactional.
P=$(kafka_tool user pipe)
acl() { kafka_tool acls --add --allow-principal User:pipe "$@" >/dev/null || fail "cannot grant $*"; }
acl --operation Read --topic "$SRC"
acl --operation Read --group "$G"
acl --operation Write --topic "$OUT"
acl --operation Write --transactional-id "kpipe-$OUT-" --resource-pattern-type prefixed

# 60k events, 3% repeats, keyed by user, in five slices produced one by
# one as the faults go (by the admin: its kproduce is not under test here).
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 60000 -k 200 -r 0.03 -s "$seed" >"$WORK/events.ndjson"
split -n l/5 -d "$WORK/events.ndjson" "$WORK/slice."
feed() { expect_exit 0 kproduce -t "$SRC" -k .user_id "$WORK/slice.0$1"; }

cat >"$WORK/pipeline.sh" <<PIPE
#!/usr/bin/env bash
kconsume --config "$P" -t "$SRC" -g "$G" --state "$S" --checkpoint-interval 200ms 2>>"$WORK/consume.err" |
  kdedup --key .value.event_id --state "$S" 2>>"$WORK/dedup.err" |
  kproduce --config "$P" -t "$OUT" --envelope --keep-partition --transactional --state "$S" --timeout 60s \
    >/dev/null 2>>"$WORK/produce.err"
PIPE

# Until the pipeline's group has committed every source partition to its
# end (in its transactions); fails at once if the pipeline died.
caught_up() {
  kill -0 "$PIPELINE" 2>/dev/null || fail "the pipeline ended: $(cat "$WORK"/*.err)"
  describe_group "$G" >"$WORK/lag"
  [[ $(lines "$WORK/lag") == 6 ]] && awk '$5 != 0 { bad = 1 } END { exit bad }' "$WORK/lag"
}

run_faults

ids() { jq -r '[.partition, .value.event_id] | @tsv' | sort -s -n -k1,1; }
kconsume -t "$SRC" -e | ids | awk '!seen[$2]++' >"$WORK/want"
kconsume -t "$OUT" -e --isolation read_committed | ids >"$WORK/committed"
assert_eq "$(lines "$WORK/want")" "$(jq -r .event_id "$WORK/events.ndjson" | sort -u | wc -l)" "distinct events in the source"
assert_files_equal "$WORK/want" "$WORK/committed"

# klag, as the admin, agrees with Kafka: the group is at the end.
klag -g "$G" -t "$SRC" --format ndjson 2>/dev/null |
  jq -r 'select(.partition != null) | "\(.topic) \(.partition) \(.committed) \(.end) \(.lag)"' |
  sort -k1,1 -k2,2n >"$WORK/klag-view"
describe_group "$G" >"$WORK/kafka-view"
assert_files_equal "$WORK/kafka-view" "$WORK/klag-view"
echo "PASS: $TEST_NAME"
