#!/usr/bin/env bash
# kbroker's control channel (kbroker(1), FAULTS): every command is answered
# with one line once applied, a bad one with one error line that changes
# nothing, and kbroker goes on serving; a request error reaches the client
# that sends the next request of that type (here a refusal kproduce cannot
# ride out: it exits 1 and says so), and only that one.
source "$(dirname "$0")/lib.sh"
requires_broker kbroker "faults on demand are kbroker's (--control)"
start_fault_broker 2 events:2
events=$(topic events)

assert_eq "$(fault_answer 'dwon 1')" "error: 'dwon 1': unknown command 'dwon', did you mean 'down'?" "answer to a typo"
assert_eq "$(fault_answer 'down 3')" "error: 'down 3': no broker 3: the cluster has brokers 1 to 2" "answer to a broker it lacks"
assert_eq "$(fault_answer 'error Produce 1 NO_SUCH_ERROR')" \
  "error: 'error Produce 1 NO_SUCH_ERROR': unknown Kafka error 'NO_SUCH_ERROR'" "answer to an unknown error"
# A comment and a blank line are not answered: the next answer is the
# next command's.
printf '# a comment\n\n' >"$WORK/control"
assert_eq "$(fault_answer 'RTT all 0')" "ok RTT all 0" "answer after a comment"
# Each bad command was also said on standard error, once.
assert_eq "$(grep -c '^kbroker: warning: control: ' "$WORK/kbroker.err")" 3 "warnings on standard error"

# The next Produce is refused for good: kproduce exits 1 with one line
# (kproduce(1): failures that are not the record's own).
fault error produce TOPIC_AUTHORIZATION_FAILED
expect_exit 1 kproduce -b "$BROKERS" -t "$events" --timeout 5s <<<'{"n":1}'
assert_eq "$(wc -l <"$WORK/err")" 1 "lines kproduce said ($(cat "$WORK/err"))"
assert_contains "$WORK/err" "kproduce: error: "
assert_contains "$WORK/err" "uthoriz"
# The error was used up: the next run goes through, and the record is
# there once.
expect_exit 0 kproduce -b "$BROKERS" -t "$events" <<<'{"n":2}'
expect_exit 0 kconsume -b "$BROKERS" -t "$events" -e --format value
assert_eq "$(cat "$WORK/out")" '{"n":2}' "records in the topic"

# kbroker still serves its control channel; SIGTERM ends it with 0 and
# removes nothing it did not make.
fault up all
kill -TERM "$BROKER_PID"
status=0
wait "$BROKER_PID" || status=$?
BROKER_PID=""
assert_eq "$status" 0 "kbroker's exit status"
[[ -p "$WORK/control" ]] || fail "kbroker removed the FIFO the test made"
