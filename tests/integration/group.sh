#!/usr/bin/env bash
# One pipeline on many machines (kpipe(7), MANY INSTANCES): copies of the
# README's pipeline, kconsume -g | kdedup | kwindow | kupsert, share one
# consumer group and one state store (an SQLite file shared by processes
# on one host, or a PostgreSQL database: lib.sh, store), and Kafka shares
# the 12 partitions among them. While the events arrive, an instance is
# stopped with SIGTERM, one is added, and instances are killed with SIGKILL
# and restarted, twice; a last instance drains the topic. The table must
# equal one clean pass over the deduplicated input: no partition's records
# counted twice or lost as they moved, every dedup key honoured across the
# moves (3% of the events repeat an earlier one).
source "$(dirname "$0")/lib.sh"
start_broker ev:12
T=$(topic ev)
G=$(group clicks)
S=$(store pipeline)
seed=${KPIPE_GROUP_SEED:-$RANDOM}
echo "group test seed: $seed (rerun with KPIPE_GROUP_SEED=$seed)"

# 300k events over 1,000 users (keyed by user, so a user's records are in
# one partition), 3% repeats, up to 2 s out of order; six pieces.
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 300000 -k 1000 -r 0.03 -j 2000 -s "$seed" >"$WORK/events.ndjson"
total=$(wc -l <"$WORK/events.ndjson")
split -n l/6 -d "$WORK/events.ndjson" "$WORK/chunk."
produce() { kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/chunk.0$1" || fail "kproduce failed"; }

# A killed member stays in the group for the session timeout: keep it
# short (kbroker's is short already).
session=()
[[ "$KPIPE_TEST_BROKER" == kafka ]] && session=(-X session.timeout.ms=6000)

# One instance: the README's pipeline, its diagnostics in NAME.err.
cat >"$WORK/instance.sh" <<PIPE
#!/usr/bin/env bash
name=\$1
shift
kconsume -b "$BROKERS" -t "$T" -g "$G" --state "$S" --checkpoint-interval 200ms -v ${session[*]} "\$@" 2>>"$WORK/\$name.err" |
  kdedup -v -k .value.event_id --state "$S" 2>>"$WORK/\$name.err" |
  kwindow --time .value.ts --key .value.user_id --tumble 1m --watermark 5s --agg count --agg sum:.value.amount \
    --time-format ms --state "$S" \${KWINDOW_EXTRA:-} 2>>"$WORK/\$name.err" |
  kupsert --db "$S" --table clicks --key window_start,key --state "$S" 2>>"$WORK/\$name.err"
PIPE

all_consumed() { (($(consumed) == total)); }

produce 0
start a
start b
start c
for i in a b c; do wait_for "instance $i to own partitions" 90 has_partitions "$i"; done
produce 1
stop a # its partitions go to b and c at a checkpoint
wait_for "a's partitions to move" 90 no_orphans 12
produce 2
start d
wait_for "instance d to own partitions" 90 has_partitions d
produce 3
kill_instance b # its partitions resume elsewhere from the last complete checkpoint
wait_for "b's partitions to move" 90 no_orphans 12
start b
wait_for "the restarted b to own partitions" 90 has_partitions b
produce 4
kill_instance c
wait_for "c's partitions to move" 90 no_orphans 12
start c
wait_for "the restarted c to own partitions" 90 has_partitions c
produce 5
wait_for "every record to be consumed" 120 all_consumed
for i in b c d; do stop "$i"; done

# Drain: one instance takes every partition, reads to the end and fires
# the windows still open.
KWINDOW_EXTRA=--flush-at-end bash "$WORK/instance.sh" z -e || fail "the drain failed: $(cat "$WORK/z.err")"
cat "$WORK"/*.err >"$WORK/diagnostics"
grep -q 'too late' "$WORK/diagnostics" && fail "records were too late: $(grep 'too late' "$WORK/diagnostics" | head -3)"
grep -q 'error' "$WORK/diagnostics" && fail "errors: $(grep error "$WORK/diagnostics" | head -5)"
grep -q 'came from partitions' "$WORK/diagnostics" && fail "a key came from two partitions: $(grep 'came from' "$WORK/diagnostics")"

# The reference: the input deduplicated, then windowed, in one pass.
kdedup --key .event_id <"$WORK/events.ndjson" |
  kwindow --time .ts --key .user_id --tumble 1m --watermark 5s --agg count --agg sum:.amount --time-format ms |
  jq -r '[.window_start, .key, .count, .sum_amount] | @tsv' | sort >"$WORK/want"
sql "$S" "SELECT window_start, key, count, sum_amount FROM clicks" | tr '|' '\t' | sort >"$WORK/got"
(($(wc -l <"$WORK/want") > 40000)) || fail "the reference has only $(wc -l <"$WORK/want") windows"
assert_files_equal "$WORK/want" "$WORK/got"

# The partitions did move: every take-over raised an epoch.
moves=$(sql "$S" "SELECT SUM(epoch - 1) FROM partition_owners")
((moves >= 12)) || fail "only $moves take-overs"
expect_exit 0 kcheckpoint verify --state "$S"
echo "group: ok ($(wc -l <"$WORK/got") windows, $moves take-overs, $(grep -c 'restored' "$WORK/diagnostics") partition restores)"
