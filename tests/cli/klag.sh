#!/usr/bin/env bash
# klag without a broker: usage errors, and `klag status` over a history fed
# directly through its documented tables (klag(1), FILES), so that the
# samples' times are the test's, not the clock's.
source "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || { echo "SKIP: sqlite3 is not installed"; exit 77; }

run 2 klag
expect_stderr "klag: error: give -g GROUP or --state FILE
"
run 2 klag -g g --state s.db
expect_stderr "klag: error: give -g GROUP or --state FILE, not both
"
run 2 klag -g g --format tabel
expect_stderr "klag: error: unknown --format 'tabel', did you mean 'table'?
"
run 2 klag -g g --window 1
expect_stderr "klag: error: --window must be at least 2 (the rules compare samples)
"
run 2 klag -g g --fail-on STAL
expect_stderr "klag: error: unknown status 'STAL', did you mean 'STALL'?
"
run 2 klag -g g
expect_stderr "klag: error: no brokers given: use -b HOST:PORT or set KPIPE_BROKERS
"
run 2 klag -g g --watch 1s --format prometheus
expect_stderr "klag: error: --watch cannot write --format prometheus (one file per sample: run klag from cron or a timer)
"
run 2 klag -g g --no-fetch
expect_stderr "klag: error: --no-fetch estimates the lag in seconds from the end offsets of --history FILE: give one
"
run 1 klag --state "$WORK/missing.db"
expect_stderr "klag: error: state file '$WORK/missing.db' does not exist
"
run 2 klag status -g g
expect_stderr "klag: error: status judges the samples of --history FILE: give one
"
H="$WORK/history.db"
run 1 klag status -g billing --history "$H"
expect_stderr "klag: error: history file '$H' does not exist
"
[[ ! -e "$H" ]] || fail "klag status created the missing history"

# An empty file is an empty history: klag gives it its tables.
: >"$H"
run 1 klag status -g billing --history "$H"
expect_no_stdout() { [[ ! -s "$WORK/out" ]] || fail "unexpected stdout: $(head -c 500 "$WORK/out")"; }
expect_no_stdout
expect_stderr "klag: error: history '$H' holds no samples of group 'billing': run klag -g billing --history $H first
"

# Four samples a minute apart. events [0]: the offset moves, the lag grows
# (WARN). events [1]: caught up, then never moves again while records
# arrive. events [2]: never committed. The broker could not tell the members.
t0=1795946400000
sqlite3 "$H" <<SQL
INSERT INTO lag_samples (id, subject_kind, subject, at) VALUES
  (1, 'group', 'billing', $t0), (2, 'group', 'billing', $((t0 + 60000))),
  (3, 'group', 'billing', $((t0 + 120000))), (4, 'group', 'billing', $((t0 + 180000)));
INSERT INTO lag_partitions (sample, topic, partition, committed, end_offset, lag_seconds, at) VALUES
  (1, 'events', 0, 100, 150, 12.5, $t0), (1, 'events', 1, 40, 40, 0, $t0), (1, 'events', 2, NULL, 7, NULL, $t0),
  (2, 'events', 0, 110, 170, 13, $((t0 + 60000))), (2, 'events', 1, 40, 45, 30, $((t0 + 60000))),
  (2, 'events', 2, NULL, 8, NULL, $((t0 + 60000))),
  (3, 'events', 0, 120, 190, 14.25, $((t0 + 120000))), (3, 'events', 1, 40, 50, 90, $((t0 + 120000))),
  (3, 'events', 2, NULL, 9, NULL, $((t0 + 120000))),
  (4, 'events', 0, 130, 210, 15.5, $((t0 + 180000))), (4, 'events', 1, 40, 55, 150, $((t0 + 180000))),
  (4, 'events', 2, NULL, 10, NULL, $((t0 + 180000)));
SQL

# The default window holds the zero lag of events [1]: only the WARN.
run 0 klag status -g billing --history "$H" --format ndjson
expect_no_stderr
expect_stdout '{"group":"billing","topic":"events","partition":0,"committed":130,"end":210,"lag":80,"lag_seconds":15.5,"status":"WARN"}
{"group":"billing","topic":"events","partition":1,"committed":40,"end":55,"lag":15,"lag_seconds":150,"status":"OK"}
{"group":"billing","topic":"events","partition":2,"committed":null,"end":10,"lag":null,"lag_seconds":null,"status":null}
{"group":"billing","topic":"events","partitions":3,"lag":95,"lag_seconds":150}
{"group":"billing","at":"2026-11-29T10:03:00.000Z","partitions":3,"lag":95,"lag_seconds":150,"status":"WARN","reason":"events [0]: the offset moved from 100 to 130 in 4 samples over 3m but the lag never decreased (50 to 80)","members":null}
'

# A window of 3: events [1] has not moved for longer than the window, and
# the broker cannot tell whether anyone consumes: STOP, and the table says
# on what grounds.
run 0 klag status -g billing --history "$H" --format table --window 3
expect_no_stderr
expect_stdout 'GROUP    TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  LAG-SECONDS  STATUS  TREND
billing  events          0             130             210   80         15.5  WARN    ▅▆▇█
billing  events          1              40              55   15        150.0  STOP    ▁▃▆█
billing  events          2               -              10    -            -  -
billing  TOTAL                                               95        150.0  STOP
note: group '"'billing'"': STOP judged from the offsets alone: the broker cannot tell whether the group has active members
'

# With the member count known, one member still in the group: stuck, not
# stopped.
sqlite3 "$H" "UPDATE lag_samples SET members = 1, group_state = 'Stable'"
run 0 klag status -g billing --history "$H" --format ndjson --window 3
expect_no_stderr
grep -q '"partition":1,.*"status":"STALL"}$' "$WORK/out" || fail "events [1] is not STALL: $(cat "$WORK/out")"
tail -1 "$WORK/out" | grep -q '"status":"STALL",.*"members":1,"group_state":"Stable"}$' || fail "group line: $(tail -1 "$WORK/out")"

# Alerts: the report, then one line of reason and exit 3; 0 below the
# thresholds.
run 3 klag status -g billing --history "$H" --format ndjson --window 3 --fail-on STALL
[[ $(wc -l <"$WORK/out") -eq 5 ]] || fail "the report was not written before the alert"
expect_stderr "klag: error: group 'billing' is STALL (--fail-on STALL): events [1]: offset 40 did not move in 3 samples over 2m while lag stayed above 0 (now 15)
"
run 0 klag status -g billing --history "$H" --format ndjson --window 3 --fail-on STOP
expect_no_stderr
run 3 klag status -g billing --history "$H" --format ndjson --max-lag 94
expect_stderr "klag: error: group 'billing': lag 95 is over --max-lag 94
"
run 0 klag status -g billing --history "$H" --format ndjson --max-lag 95
run 3 klag status -g billing --history "$H" --format ndjson --max-lag-seconds 149.9 --max-lag 10
expect_stderr "klag: error: group 'billing': lag 95 is over --max-lag 10; group 'billing': events [1] is 150.0s behind, over --max-lag-seconds 149.9
"
run 0 klag status -g billing --history "$H" --format ndjson --max-lag-seconds 150

# The offset went back in the last sample: REWIND, whatever the window.
sqlite3 "$H" "UPDATE lag_partitions SET committed = 115 WHERE sample = 4 AND partition = 0"
run 3 klag status -g billing --history "$H" --format prometheus --fail-on REWIND
expect_stderr "klag: error: group 'billing' is REWIND (--fail-on REWIND): events [0]: the committed offset went back from 120 to 115
"
grep -qx 'kpipe_consumer_group_status{group="billing",status="REWIND"} 1' "$WORK/out" || fail "no REWIND series"
grep -qx 'kpipe_consumer_group_members{group="billing"} 1' "$WORK/out" || fail "no members series"

# --plot (issue 38): the picture of the whole history instead of the
# report; the alerts still decide the exit status.
run 2 klag -g billing --plot "$WORK/p.svg"
expect_stderr "klag: error: --plot draws the samples of --history FILE: give one
"
run 2 klag -g billing --history "$H" --watch 1s --plot
expect_stderr "klag: error: --plot draws the history once: give no --watch
"
run 2 klag status -g billing --history "$H" --plot --format table
expect_stderr "klag: error: --plot and --format cannot be combined: the picture replaces the report
"
run 3 klag status -g billing --history "$H" --plot "$WORK/p.svg" --fail-on REWIND
expect_stdout ""
expect_stderr "klag: error: group 'billing' is REWIND (--fail-on REWIND): events [0]: the committed offset went back from 120 to 115
"
# A series per group unless --granularity is given: then one per partition.
[[ $(grep -o 'data-series="[^"]*"' "$WORK/p.svg" | sort -u) == 'data-series="billing"' ]] ||
  fail "--plot by group: $(grep -o 'data-series="[^"]*"' "$WORK/p.svg" | sort -u)"
run 0 klag status -g billing --history "$H" --plot - --granularity partition
expect_no_stderr
[[ $(grep -o 'data-series="[^"]*"' "$WORK/out" | sort -u | tr '\n' ' ') == 'data-series="events[0]" data-series="events[1]" ' ]] ||
  fail "--plot by partition: $(grep -o 'data-series="[^"]*"' "$WORK/out" | sort -u)"
# One sample is a point, not a trend.
sqlite3 "$H" "INSERT INTO lag_samples (id, subject_kind, subject, at) VALUES (9, 'group', 'solo', $t0);
  INSERT INTO lag_partitions (sample, topic, partition, committed, end_offset, at) VALUES (9, 'events', 0, 1, 2, $t0)"
run 1 klag status -g solo --history "$H" --plot "$WORK/solo.svg"
expect_stderr "klag: error: history '$H' holds 1 sample of group 'solo': a plot needs at least two
"
[[ ! -e "$WORK/solo.svg" ]] || fail "an empty picture was written"
