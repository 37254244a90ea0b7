#!/usr/bin/env bash
# Exactly once into Kafka from many instances (kpipe(7), MANY INSTANCES):
# copies of kconsume -g | kdedup | kjoin | kproduce --transactional share one
# consumer group and one state store, and each instance commits its
# checkpoints' records and offsets in its own transactions, as the group's
# member (KIP-447). While the events arrive, an instance is stopped with
# SIGTERM, one is added, and two are killed with SIGKILL and started again
# at once (static members: they get their partitions back without waiting
# for their session to time out); a last instance drains the topic. A
# read_committed reader of the output sees, in each partition, the source
# partition's records with the repeated events dropped, each exactly once,
# in the source's order and joined with its user's row of the table (a
# file every instance reads whole).
source "$(dirname "$0")/lib.sh"
requires_broker kafka "kbroker (librdkafka's mock cluster) shows read_committed readers aborted records"
start_broker ev:12 out:12
T=$(topic ev)
OUT=$(topic out)
G=$(group eos)
S=$(store pipeline)
seed=${KPIPE_EOS_SEED:-$RANDOM}
echo "instances_exactly_once seed: $seed (rerun with KPIPE_EOS_SEED=$seed)"

# 300k events over 1,000 users (keyed by user), 3% repeats; six pieces.
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 300000 -k 1000 -r 0.03 -s "$seed" >"$WORK/events.ndjson"
total=$(wc -l <"$WORK/events.ndjson")
split -n l/6 -d "$WORK/events.ndjson" "$WORK/chunk."
produce() { kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/chunk.0$1" || fail "kproduce failed"; }
# The users table: each user's tier, which the output must carry.
jq -c '{user_id, tier: ("tier-" + .user_id)}' "$WORK/events.ndjson" | sort -u >"$WORK/users.ndjson"

# A stopped member (SIGTERM) leaves the group; a killed one is a static
# member, whose restart takes its partitions back; one killed for good
# would keep them for the session timeout: a short one.
cat >"$WORK/instance.sh" <<PIPE
#!/usr/bin/env bash
name=\$1
shift
kconsume -b "$BROKERS" -t "$T" -g "$G" --state "$S" --checkpoint-interval 300ms -v -X session.timeout.ms=6000 "\$@" 2>>"$WORK/\$name.err" |
  kdedup -v -k .value.event_id --state "$S" 2>>"$WORK/\$name.err" |
  kjoin --table "$WORK/users.ndjson" --table-key .user_id -k .value.user_id --as .value.user --state "$S" 2>>"$WORK/\$name.err" |
  kproduce -b "$BROKERS" -t "$OUT" --envelope --keep-partition --transactional --state "$S" -v >/dev/null 2>>"$WORK/\$name.err"
PIPE

all_consumed() { (($(consumed) == total)); }
# restart NAME: killed, then the same command again at once; how long
# until it owns partitions again (static membership: no session timeout
# to wait for).
restart() {
  kill_instance "$1"
  local began=$EPOCHREALTIME
  start "$1"
  wait_for "the restarted $1 to own partitions" 60 has_partitions "$1"
  restarts+=("$1 $(awk -v a="$began" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }')")
}
restarts=()

produce 0
start a
start b
start c
for i in a b c; do wait_for "instance $i to own partitions" 90 has_partitions "$i"; done
produce 1
stop a
wait_for "a's partitions to move" 90 no_orphans 12
produce 2
start d
wait_for "instance d to own partitions" 90 has_partitions d
# The kills come while records flow: a piece is being produced, and the
# instances have consumed part of it.
produce_while() {
  local before
  before=$(consumed)
  produce "$1" &
  local producer=$!
  growing() { (($(consumed) > before + 5000)); }
  wait_for "the instances to consume piece $1" 60 growing
  restart "$2"
  wait "$producer" || fail "kproduce failed"
}
produce_while 3 b
produce_while 4 c
produce 5
wait_for "every record to be consumed" 150 all_consumed
for i in b c d; do stop "$i"; done
bash "$WORK/instance.sh" z -e || fail "the drain failed: $(cat "$WORK/z.err")"

cat "$WORK"/*.err >"$WORK/diagnostics"
grep -q 'error' "$WORK/diagnostics" && fail "errors: $(grep error "$WORK/diagnostics" | head -5)"

assert_exactly_once "$T" "$OUT" "$total"
unjoined=$(kconsume -b "$BROKERS" -t "$OUT" -e 2>/dev/null |
  jq -c 'select(.value.user.tier != ("tier-" + .value.user_id))' | wc -l)
assert_eq "$unjoined" 0 "output records without their user's row"
# The instances did commit in transactions of their own: one id per
# instance name (a restart, and a later instance in a free name, take one
# again).
ids=$(grep -ho "transactional id '[^']*'" "$WORK/diagnostics" | sort -u | wc -l)
((ids >= 3)) || fail "only $ids transactional ids: $(grep -h "transactional id" "$WORK/diagnostics" | sort -u)"
moves=$(sql "$S" "SELECT SUM(epoch - 1) FROM partition_owners")
expect_exit 0 kcheckpoint verify --state "$S"
echo "instances_exactly_once: ok ($(wc -l <"$WORK/got") events, $moves take-overs, $ids transactional ids, restarts: ${restarts[*]})"
