#!/usr/bin/env bash
# A zombie instance (kpipe(7), MANY INSTANCES): instance a of a pipeline
# into Kafka (kconsume -g | kdedup | kproduce --transactional) is stopped
# with SIGSTOP, its kproduce first, so that checkpoint lines wait in its
# pipe; past its session timeout, the group gives its partitions to
# instance b, which reads them, and the events produced meanwhile, from their
# last complete checkpoint. Then a
# runs again: its kproduce commits a waiting checkpoint as the group
# member it was, the group's coordinator refuses it (KIP-447), and kproduce
# exits 1 with one line saying it was fenced. The output holds every event
# exactly once all the same.
source "$(dirname "$0")/lib.sh"
requires_broker kafka "kbroker (librdkafka's mock cluster) shows read_committed readers aborted records"
start_broker ev:4 out:4
T=$(topic ev)
OUT=$(topic out)
G=$(group zombie)
S=$(store pipeline)
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 40000 -k 200 -r 0.03 -s 7 >"$WORK/events.ndjson"
total=$(wc -l <"$WORK/events.ndjson")
split -n l/2 -d "$WORK/events.ndjson" "$WORK/chunk."
produce() { kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/chunk.0$1" || fail "kproduce failed"; }

cat >"$WORK/instance.sh" <<PIPE
#!/usr/bin/env bash
name=\$1
shift
kconsume -b "$BROKERS" -t "$T" -g "$G" --state "$S" --checkpoint-interval 200ms -v -X session.timeout.ms=6000 "\$@" 2>>"$WORK/\$name.err" |
  kdedup -v -k .value.event_id --state "$S" 2>>"$WORK/\$name.err" |
  kproduce -b "$BROKERS" -t "$OUT" --envelope --keep-partition --transactional --state "$S" -v >/dev/null 2>>"$WORK/\$name.produce.err"
echo "\${PIPESTATUS[2]}" >"$WORK/\$name.produce.status"
PIPE
all_consumed() { (($(consumed) == total)); }
first=$(wc -l <"$WORK/chunk.00")
first_consumed() { (($(consumed) == first)); }

produce 0
start a
start b
for i in a b; do wait_for "instance $i to own partitions" 90 has_partitions "$i"; done
wait_for "the first piece to be consumed" 60 first_consumed

# a's kproduce stops first; the checkpoint lines a's kconsume goes on
# emitting (nothing else flows now) wait in its pipe, each passed by kdedup.
# It stops between two commits: stopped inside one (a transaction per
# checkpoint line), its open transaction would hold the group's offsets
# until Kafka aborts it at its timeout (60 s), and that abort fences it by
# its epoch before the group can.
txn_id=$(grep -o "transactional id '[^']*'" "$WORK/a.produce.err" | head -1 | cut -d"'" -f2)
[[ -n "$txn_id" ]] || fail "a's kproduce named no transactional id: $(cat "$WORK/a.produce.err")"
between_commits() {
  kill -STOP "$(instance_pid a kproduce)"
  kafka_tool transactions describe --transactional-id "$txn_id" >"$WORK/txn" 2>&1 ||
    fail "kafka-transactions describe failed: $(cat "$WORK/txn")"
  awk 'NR == 2 && $5 ~ /^(Ongoing|Prepare)/ { exit 1 }' "$WORK/txn" && return 0
  kill -CONT "$(instance_pid a kproduce)"
  return 1
}
wait_for "a's kproduce to stop between two commits" 60 between_commits
open_checkpoints() { (($(sql "$S" "SELECT COUNT(*) FROM checkpoints WHERE completed_at IS NULL") >= 3)); }
wait_for "checkpoint lines to wait for a's kproduce" 30 open_checkpoints
kill -STOP -- "-${sessions[a]}"
produce 1
b_owns_all() { (($(owns b) == 4)); }
wait_for "b to take a's partitions over" 90 b_owns_all
wait_for "b to consume everything" 90 all_consumed

kill -CONT -- "-${sessions[a]}"
wait_for "the zombie to end" 60 gone a
assert_eq "$(cat "$WORK/a.produce.status")" 1 "the zombie kproduce's exit status"
grep -q '^kproduce: error: .*fenced: the consumer group no longer counts this instance' "$WORK/a.produce.err" ||
  fail "the zombie kproduce did not say it was fenced by the group: $(cat "$WORK/a.produce.err")"
assert_eq "$(grep -c '^kproduce: error' "$WORK/a.produce.err")" 1 "the zombie kproduce's error lines"

stop b
bash "$WORK/instance.sh" z -e || fail "the drain failed: $(cat "$WORK/z.err" "$WORK/z.produce.err")"
assert_exactly_once "$T" "$OUT" "$total"
echo "instances_zombie: ok ($(wc -l <"$WORK/got") events; the zombie: $(grep '^kproduce: error' "$WORK/a.produce.err")"
