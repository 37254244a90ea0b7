#!/usr/bin/env bash
# A broker slower than the client's timeouts (kpipe(7), KAFKA OPTIONS:
# --timeout is how long a program waits for a broker that does not answer).
# At start, kconsume and kproduce give up after --timeout with exit 1 and
# one line. Mid-stream, kproduce whose requests time out (socket.timeout.ms
# below the broker's round trip) retries until message.timeout.ms, then
# exits 1 with one error line counting the records not acknowledged; a
# slow broker may have written them all the same, so running kproduce again
# on the same input (what a supervisor does) loses nothing and may repeat
# records: at least once, as kproduce(1) promises without --transactional.
# The slowness is made with kbroker's --control (rtt).
source "$(dirname "$0")/lib.sh"
requires_broker kbroker "a slow broker on demand is kbroker's (--control rtt)"
start_fault_broker 1 events:2
T=$(topic events)
awk 'BEGIN { for (n = 1; n <= 1000; n++) printf "{\"n\":%d}\n", n }' >"$WORK/in"

fault rtt all 3s
for prog in kconsume kproduce; do
  args=(-e)
  [[ $prog == kconsume ]] || args=()
  SECONDS=0
  expect_exit 1 "$prog" -b "$BROKERS" -t "$T" "${args[@]}" --timeout 1s <"$WORK/in"
  assert_eq "$(cat "$WORK/err")" "$prog: error: cannot reach broker '$BROKERS': no answer within 1s" "$prog's message"
  ((SECONDS <= 5)) || fail "$prog took ${SECONDS}s to give up after --timeout 1s"
done
fault rtt all 0
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e
assert_empty "$WORK/out"

# Mid-stream: connected first, then every answer comes after the client's
# socket timeout.
mkfifo "$WORK/feed"
kproduce -b "$BROKERS" -t "$T" -X socket.timeout.ms=1000 -X message.timeout.ms=4000 <"$WORK/feed" >"$WORK/p.out" 2>"$WORK/p.err" &
producer=$!
exec 7>"$WORK/feed"
head -n 1 "$WORK/in" >&7
timeout 20 kconsume -b "$BROKERS" -t "$T" -c 1 >/dev/null || fail "the first record did not arrive: $(cat "$WORK/p.err")"
fault rtt all 2500ms
tail -n +2 "$WORK/in" >&7
exec 7>&-
status=0
wait "$producer" || status=$?
assert_eq "$status" 1 "kproduce's exit status ($(cat "$WORK/p.err"))"
assert_eq "$(grep -c '^kproduce: error: ' "$WORK/p.err")" 1 "error lines ($(cat "$WORK/p.err"))"
[[ "$(tail -n 1 "$WORK/p.err")" =~ ^kproduce:\ error:\ [0-9]+\ of\ 1000\ records\ not\ acknowledged\ by\ \'$T\':\ Local:\ Message\ timed\ out$ ]] ||
  fail "kproduce's last line: $(tail -n 1 "$WORK/p.err")"

# Again, on a broker back to speed: every record at least once.
fault rtt all 0
expect_exit 0 kproduce -b "$BROKERS" -t "$T" <"$WORK/in"
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e --format value
sort -u "$WORK/out" >"$WORK/got"
sort "$WORK/in" >"$WORK/want"
assert_files_equal "$WORK/got" "$WORK/want"
