#!/usr/bin/env bash
# kproduce (idempotent, acks=all) into a topic replicated three times with
# min.insync.replicas=2, while the leader of partition 0 dies (SIGKILL) in
# the middle of the run: the producer waits for the new leader and goes
# on, and every record is in the topic exactly once, in order per
# partition. Then the dead broker comes back and rejoins every ISR.
source "$(dirname "$0")/../integration/lib.sh"
start_broker out:6
T=$(topic out)
N=300000
# Keyed (-k .k), so that each partition's records must keep their order.
seq 1 "$N" | awk '{ printf "{\"k\":\"k%d\",\"n\":%d}\n", $1 % 60, $1 }' >"$WORK/in"
head -n $((N / 3)) "$WORK/in" >"$WORK/first"
tail -n +$((N / 3 + 1)) "$WORK/in" >"$WORK/rest"

leader=$(kafka_tool leader "$T" 0)
started=$SECONDS
# The rest of the input waits until the leader is dead: the run spans the
# failover whatever the machine's speed.
{
  cat "$WORK/first"
  wait_for "the leader's crash" 120 test -f "$WORK/crashed"
  cat "$WORK/rest"
} | kproduce -t "$T" -k .k --timeout 60s 2>"$WORK/produce.err" &
producer=$!
# Kill once records have reached partition 0 from this run.
has_records() { [[ $(kcat -Q -t "$T:0:-1" 2>/dev/null | awk '{ print $NF }') -gt 0 ]]; }
wait_for "records in partition 0" 60 has_records
kafka_tool crash "$leader" 2>/dev/null
crashed_at=$SECONDS
touch "$WORK/crashed"
rc=0
wait "$producer" || rc=$?
((rc == 0)) || fail "kproduce exited $rc through the failover: $(cat "$WORK/produce.err")"
echo "kproduce: $N records in $((SECONDS - started))s, $((SECONDS - crashed_at))s after broker $leader was killed" >&2
[[ ! -s "$WORK/produce.err" ]] && echo "kproduce said nothing" >&2 || sed 's/^/  /' "$WORK/produce.err" >&2
new_leader=$(kafka_tool leader "$T" 0)
[[ "$new_leader" != "$leader" && "$new_leader" -ge 1 ]] || fail "partition 0's leader is still '$new_leader'"

# Every record once, in order per partition.
kcat -C -t "$T" -e -q -f '%p %s\n' >"$WORK/out" || fail "cannot read $T back"
assert_eq "$(wc -l <"$WORK/out")" "$N" "records in the topic"
assert_eq "$(cut -d' ' -f2- "$WORK/out" | sort | md5sum)" "$(sort "$WORK/in" | md5sum)" "the records, each once"
order() {
  awk '{ match($2, /"n":[0-9]+/); n = substr($2, RSTART + 4, RLENGTH - 4) + 0
         if (n <= last[$1]) { print "partition " $1 ": " n " after " last[$1]; exit 1 } last[$1] = n }' "$WORK/out"
}
order >"$WORK/order" || fail "out of order: $(cat "$WORK/order")"

# The broker comes back and catches up: restart waits until every replica
# is in sync again.
kafka_tool restart "$leader" >/dev/null 2>"$WORK/restart.err" || fail "broker $leader did not come back: $(cat "$WORK/restart.err")"
echo "PASS: $TEST_NAME"
