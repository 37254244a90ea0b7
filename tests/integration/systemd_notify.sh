#!/usr/bin/env bash
# Under systemd (kpipe(7), SYSTEMD): the terminal stage of a pipeline with
# --state tells the service manager READY=1 at the first checkpoint it
# completes, then WATCHDOG=1 at each one after, so that WatchdogSec restarts
# a pipeline whose checkpoints stop completing; no other stage says
# anything. The listener here is what systemd is: a datagram socket named
# by NOTIFY_SOCKET. A pipeline with nothing to read still completes
# checkpoints, so an idle pipeline is not taken for a stuck one.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "skipped: needs python3"; exit 77; }
start_broker events:2
T=$(topic events)
S=$(store state)

"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 400 -k 20 -s 3 >"$WORK/events"
expect_exit 0 kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/events"

# The listener writes each datagram on one line (newlines as '|'), and
# says it is listening first.
export NOTIFY_SOCKET=$WORK/notify
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("listening", flush=True)
while True:
    data = s.recv(4096).decode()
    print(data.replace("\n", "|"), flush=True)
' "$NOTIFY_SOCKET" >"$WORK/notified" 2>"$WORK/listener.err" &
listener=$!
wait_for "the listener" 10 grep -qsx listening "$WORK/notified"

# The pipeline reads the topic, then stays idle until it has completed
# five checkpoints more, then is stopped as systemd stops it (SIGTERM).
kconsume -b "$BROKERS" -t "$T" --state "$S" --checkpoint-interval 200ms 2>"$WORK/kconsume.err" |
  kdedup -k .value.event_id --state "$S" 2>"$WORK/kdedup.err" |
  kupsert --db "$S" --state "$S" --table events --key partition,offset 2>"$WORK/kupsert.err" &
pipeline=$!
all_read() { [[ $(sql "$S" "SELECT COUNT(*) FROM events" 2>/dev/null || echo 0) -eq 400 ]]; }
wait_for "all 400 records" 60 all_read
idle_from=$(completed)
five_more() { (($(completed) >= idle_from + 5)); }
wait_for "five checkpoints while idle" 60 five_more
pkill -TERM -f "kconsume -b $BROKERS -t $T --state" || fail "no kconsume to stop"
wait "$pipeline" || fail "the pipeline failed: $(cat "$WORK"/*.err)"

done_in_store=$(sql "$S" "SELECT COUNT(*) FROM checkpoints WHERE completed_at IS NOT NULL")
# Every checkpoint the store has completed was told, and nothing else was:
# the first as READY=1, the rest as WATCHDOG=1, each with its status.
wait_for "the last notification" 10 test "$(($(wc -l <"$WORK/notified") - 1))" -ge "$done_in_store"
kill "$listener"
tail -n +2 "$WORK/notified" >"$WORK/told"
assert_eq "$(wc -l <"$WORK/told")" "$done_in_store" "one notification per completed checkpoint"
assert_eq "$(head -1 "$WORK/told" | cut -d'|' -f1)" "READY=1" "the first"
assert_eq "$(tail -n +2 "$WORK/told" | cut -d'|' -f1 | sort -u)" "WATCHDOG=1" "the others"
first=$(sql "$S" "SELECT MIN(id) FROM checkpoints WHERE completed_at IS NOT NULL")
head -1 "$WORK/told" >"$WORK/told.first"
assert_contains "$WORK/told.first" "READY=1|STATUS=checkpoint $first complete "
assert_contains "$WORK/told.first" " ms after its barrier, end to end p99 "
assert_contains "$WORK/told.first" " ms; 1 since the start"

# Without NOTIFY_SOCKET nothing is sent and nothing changes.
unset NOTIFY_SOCKET
expect_exit 0 kdedup -k .id /dev/null
