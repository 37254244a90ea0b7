#!/usr/bin/env bash
# An instance whose reader goes while its transactional kproduce still
# commits (kpipe(7), MANY INSTANCES): SIGTERM to a pipeline's every stage
# at once (systemd's stop) can end the stage after kconsume first, so
# that kconsume finds its output closed while kproduce commits a
# checkpoint it read, as kconsume's member of the group. kconsume must stay
# in the group until that kproduce is done: leaving at once made the
# group's coordinator refuse the commit ("Unknown member") and kproduce
# exit 1 saying it was fenced (tests/cluster/failover_transactional, once
# under load). Here awk plays the stage that stopped first, so that the
# order is certain: it passes the lines up to the first checkpoint after
# 20,000 records, then exits while kconsume still reads.
source "$(dirname "$0")/lib.sh"
requires_broker kafka "kbroker's group coordinator takes a transaction's offsets from a member that has left"
start_broker ev:4 out:4
T=$(topic ev)
OUT=$(topic out)
G=$(group gone)
S=$(store pipeline)
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 60000 -k 200 -s 11 >"$WORK/events.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/events.ndjson"

set +e  # the stages' exit statuses are what is tested
kconsume -b "$BROKERS" -t "$T" -g "$G" --state "$S" --checkpoint-interval 100ms -v 2>"$WORK/consume.err" |
  awk '!/^\{"\$kpipe":/ { n++ } { print } n > 20000 && /^\{"\$kpipe":"checkpoint"/ { exit }' |
  kproduce -b "$BROKERS" -t "$OUT" --envelope --keep-partition --transactional --state "$S" -v \
    >/dev/null 2>"$WORK/produce.err"
status=("${PIPESTATUS[@]}")
set -e
assert_eq "${status[2]}" 0 "kproduce's exit status ($(grep -v ': info: ' "$WORK/produce.err"))"
assert_eq "${status[0]}" 0 "kconsume's exit status ($(grep -v ': info: ' "$WORK/consume.err"))"
grep -q 'committed [1-9][0-9]* transactions' "$WORK/produce.err" || fail "kproduce committed no checkpoint: $(cat "$WORK/produce.err")"

# What kproduce committed is the output, and the group's and the store's
# offsets say the same: nothing lost, nothing to read twice.
out=$(kconsume -b "$BROKERS" -t "$OUT" -e 2>/dev/null | wc -l)
((out > 20000)) || fail "only $out records in the output"
assert_eq "$(consumed)" "$out" "records the store's offsets cover"
describe_group "$G" >"$WORK/group"
assert_eq "$(awk '{ n += $3 } END { print n }' "$WORK/group")" "$out" "records the group's offsets cover"

# Then, once more records are read and committed, the reader goes without
# reading kconsume's final checkpoint (a stage SIGTERM stopped before it
# could pass it on). That checkpoint can no longer complete: kconsume ends
# once its kproduce has exited, not at the end of its wait for a
# checkpoint (60 s). Here awk is stopped, so that kconsume's final
# checkpoint waits in its pipe, and then killed.
cat >"$WORK/stop.sh" <<PIPE
#!/usr/bin/env bash
kconsume -b "$BROKERS" -t "$T" -g "$G" --state "$S" --checkpoint-interval 100ms 2>>"$WORK/consume2.err" |
  awk '{ print; fflush() }' |
  kproduce -b "$BROKERS" -t "$OUT" --envelope --keep-partition --transactional --state "$S" \
    >/dev/null 2>>"$WORK/produce2.err"
PIPE
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 5000 -k 200 -s 12 >"$WORK/more.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/more.ndjson"
total=$(cat "$WORK/events.ndjson" "$WORK/more.ndjson" | wc -l)
start_session "$WORK/stop.sh"
session=$SESSION
all_consumed() { (($(consumed) == total)); }
wait_for "the rest to be consumed and committed" 60 all_consumed
emitted() { sql "$S" "SELECT COALESCE(MAX(id), 0) FROM checkpoints" 2>/dev/null || echo 0; }
before=$(emitted)
kill -STOP "$(pgrep -s "$session" -x awk)"
kill -TERM "$(pgrep -s "$session" -x kconsume)"
final_emitted() { (($(emitted) > before)); }
wait_for "kconsume's final checkpoint" 30 final_emitted
kill -KILL "$(pgrep -s "$session" -x awk)"
consume_gone() { ! pgrep -s "$session" -x kconsume >/dev/null; }
wait_for "kconsume to end once its reader and its kproduce have gone" 30 consume_gone
gone_session() { [[ -z "$(ps -o stat= -s "$session" | grep -v '^Z')" ]]; }
wait_for "the pipeline to end" 30 gone_session
grep -h error "$WORK/consume2.err" "$WORK/produce2.err" && fail "the stages said errors"
assert_eq "$(kconsume -b "$BROKERS" -t "$OUT" -e 2>/dev/null | wc -l)" "$total" "records in the output"
echo "PASS: $TEST_NAME ($out records committed, then the reader went; then the rest, and a stop)"
