#!/usr/bin/env bash
# SIGTERM stops a program even when the reader of its output has stopped
# reading: once its output blocked it would otherwise wait forever. It
# waits a grace period for the reader, then exits 1 and says how much was
# not written.
source "$(dirname "$0")/lib.sh"
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 20000 >"$WORK/events.ndjson"
mkfifo "$WORK/pipe"
exec 5<>"$WORK/pipe"   # a reader that never reads
kdlq guard --require .event_id:string <"$WORK/events.ndjson" >"$WORK/pipe" 2>"$WORK/err" &
pid=$!
# Wait until it is blocked writing into the full pipe.
for _ in $(seq 500); do
  [[ "$(cat /proc/$pid/wchan 2>/dev/null)" == *pipe_write ]] && break
  sleep 0.02  # polling a process state: there is nothing to wait on
done
[[ "$(cat /proc/$pid/wchan 2>/dev/null)" == *pipe_write ]] || fail "kdlq guard never blocked on its output"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
exec 5<&-
[[ $status -eq 1 ]] || fail "exit status $status, expected 1"
grep -qE "^kdlq: error: stopped with [0-9]+ bytes of output not written: '<stdout>' is not reading$" "$WORK/err" ||
  fail "stderr: $(cat "$WORK/err")"
