#!/usr/bin/env bash
# The README's pipeline (kconsume --state through kupsert --state) runs on
# a real broker that is crashed (SIGKILL) and restarted on its data, twice,
# and paused (SIGSTOP) for longer than the group's session timeout, with
# records arriving around each fault. Each program either rides the fault
# out or exits 1 with one line; a supervisor loop restarts the pipeline when
# it exits, as systemd's Restart=on-failure would. After a drain, the table
# equals the table of one clean pass over the same topic, and so do the
# dead letters.
source "$(dirname "$0")/lib.sh"
own_kafka
start_broker ev:2
T=$(topic ev)
G=$(group clicks)
S=$(store state)
D=$(store dead)
DB=$(store table)

# Events in four rounds; a few bad ones (no user, a time that is not one)
# in each, for the dead-letter store.
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 16000 -k 40 -r 0.03 -j 2000 -s 7 >"$WORK/events.ndjson"
split -n l/4 -d "$WORK/events.ndjson" "$WORK/round."
for r in 0 1 2 3; do
  printf '%s\n' "{\"event_id\":\"bad-$r\",\"ts\":1795946500000,\"amount\":5}" \
    "{\"event_id\":\"bad-t$r\",\"user_id\":\"u000007\",\"ts\":\"yesterday\",\"amount\":9}" >"$WORK/bad.0$r"
done
produce_round() {
  kproduce -b "$BROKERS" -t "$T" --timeout 60s -k .user_id "$WORK/round.0$1" 7>&- &&
    kproduce -b "$BROKERS" -t "$T" "$WORK/bad.0$1" 7>&- || fail "kproduce of round $1 failed"
}
# pipeline.sh STATE DLQ DB GROUP [kconsume options]: the README's pipeline.
# A session timeout of 6 s (the broker's minimum) so that a pause outlasts it.
cat >"$WORK/pipeline.sh" <<PIPE
#!/usr/bin/env bash
set -o pipefail
s=\$1 d=\$2 db=\$3 g=\$4
shift 4
kconsume -b "$BROKERS" -t "$T" -g "\$g" --state "\$s" --checkpoint-interval 200ms -X session.timeout.ms=6000 "\$@" |
  kdlq guard --require .value.user_id:string --require .value.ts:time --dlq "\$d" -q |
  kdedup --key .value.event_id --state "\$s" |
  kwindow --time .value.ts --key .value.user_id --tumble 1m --watermark 5s \\
    --agg count --agg amount=sum:.value.amount --state "\$s" \${KWINDOW_EXTRA:-} |
  kupsert --db "\$db" --table clicks --key window_start,key --state "\$s"
status=\$?
echo "\${PIPESTATUS[*]}" >>"$WORK/statuses"
exit \$status
PIPE

# The supervisor: starts the pipeline again whenever it exits, until told
# to stop; a session of its own, so that one signal ends it all.
cat >"$WORK/supervisor.sh" <<SUP
#!/usr/bin/env bash
while [[ ! -e "$WORK/stop" ]]; do
  bash "$WORK/pipeline.sh" "$S" "$D" "$DB" "$G" 2>>"$WORK/pipeline.err"
  echo "\$?" >>"$WORK/restarts"
  sleep 0.5 # systemd's RestartSec: a pipeline that fails at once does not spin
done
SUP
: >"$WORK/restarts"
setsid bash "$WORK/supervisor.sh" 7>&- &
PIPELINE=$!

# covers N: the newest complete checkpoint's offsets cover N records.
covers() { (($(consumed) >= $1)); }
total=0
round_lines() { cat "$WORK/round.0$1" "$WORK/bad.0$1" | wc -l; }

produce_round 0
total=$((total + $(round_lines 0)))
wait_for "the pipeline to read round 0" 60 covers "$total"

# Crash with records on their way: the round is produced while the broker
# is down (kproduce waits for it) and restarted.
for r in 1 2; do
  broker crash
  produce_round "$r" &
  producer=$!
  broker restart >/dev/null || fail "the broker did not restart: $(tail -5 "$OWN_KAFKA/node1/kafka.log")"
  wait "$producer" || fail "kproduce of round $r failed"
  total=$((total + $(round_lines "$r")))
  wait_for "the pipeline to read round $r after crash $r" 120 covers "$total"
done

# A pause longer than the session timeout, just after a round is in: the
# broker comes back to find the group's member expired.
produce_round 3
total=$((total + $(round_lines 3)))
broker pause
sleep 8 # the fault's length, not a wait for an event: longer than session.timeout.ms=6000
broker resume
wait_for "the pipeline to read round 3 after the pause" 120 covers "$total"

# Stop the supervisor and its pipeline, then drain: read to the end and
# close the windows still open.
touch "$WORK/stop"
kill -KILL -- "-$PIPELINE" 2>/dev/null || true
wait "$PIPELINE" 2>/dev/null || true
wait_for "the supervised pipeline to end" 30 pipeline_gone
PIPELINE=""
# The killed kconsume stays a member of the group until its session times
# out: a drain that joined before would get only some of the partitions,
# and -e ends at the end of those (kpipe(7), MANY INSTANCES).
group_empty() {
  kafka_tool groups --describe --group "$G" --state 2>/dev/null | awk -v g="$G" '$1 == g { print $(NF - 1) }' |
    grep -qx Empty
}
wait_for "the killed pipeline's member to leave the group" 60 group_empty
KWINDOW_EXTRA=--flush-at-end bash "$WORK/pipeline.sh" "$S" "$D" "$DB" "$G" -e 2>>"$WORK/pipeline.err" ||
  fail "the drain failed: $(cat "$WORK/pipeline.err")"

# What the programs said: warnings, and errors of one line each; no
# program died of a signal (an exit status above 128).
if grep -v -E '^[a-z]+: (warning|error): ' "$WORK/pipeline.err" | grep -q .; then
  fail "the programs said more than one-line diagnostics: $(grep -v -E '^[a-z]+: (warning|error): ' "$WORK/pipeline.err" | head -5)"
fi
awk '{ for (i = 1; i <= NF; i++) if ($i > 128 || ($i != 0 && $i != 1 && $i != 141)) bad = bad " " $0 } END { if (bad) { print bad; exit 1 } }' \
  "$WORK/statuses" >"$WORK/bad_statuses" || fail "exit statuses other than 0 and 1 (and 141, a stage after one that failed): $(cat "$WORK/bad_statuses")"

# One clean pass over the same topic, in stores of its own.
S2=$(store clean_state) D2=$(store clean_dead) DB2=$(store clean_table)
KWINDOW_EXTRA=--flush-at-end bash "$WORK/pipeline.sh" "$S2" "$D2" "$DB2" "$(group clean)" -e 2>"$WORK/clean.err" ||
  fail "the clean pass failed: $(cat "$WORK/clean.err")"
table() { sql "$1" 'SELECT window_start, key, count, amount FROM clicks ORDER BY window_start, key'; }
table "$DB" >"$WORK/got"
table "$DB2" >"$WORK/want"
[[ -s "$WORK/want" ]] || fail "the clean pass wrote no rows"
assert_files_equal "$WORK/want" "$WORK/got"
dead() { kdlq list --dlq "$1" --format ndjson | jq -r '"\(.source_partition)/\(.source_offset) \(.reason | sub("^line [0-9]+: "; ""))"' | sort -u; }
dead "$D" >"$WORK/dead.got"
dead "$D2" >"$WORK/dead.want"
assert_eq "$(wc -l <"$WORK/dead.want")" 8 "dead letters of the clean pass"
assert_files_equal "$WORK/dead.want" "$WORK/dead.got"
expect_exit 0 kcheckpoint verify --state "$S"
echo "broker crash, pipeline: ok ($(wc -l <"$WORK/restarts") restarts by the supervisor, exit statuses: $(paste -sd' ' "$WORK/restarts"); $(wc -l <"$WORK/got") rows)"
