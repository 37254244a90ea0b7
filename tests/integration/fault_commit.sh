#!/usr/bin/env bash
# Commits the group refuses (kpipe(7), BROKER FAULTS: a coordinator out of
# reach is no error; nothing is lost). A commit answered NOT_COORDINATOR or
# REQUEST_TIMED_OUT a time or two is retried by librdkafka: kconsume -g
# exits 0 without a word and the next run starts after what it wrote. Three
# refusals in a row are a refused commit: tried again at the next commit,
# and when the one at exit is refused, one warning, and the next run reads
# those records again (at least once), none other. The same holds
# mid-checkpoint: kconsume --state mirrors each complete checkpoint into
# the group, through refusals, so that a reader of the group starts where
# the pipeline ended. Over all runs every record is read, and only the
# failed run's records twice. Refusals made with kbroker's --control.
source "$(dirname "$0")/lib.sh"
requires_broker kbroker "refused commits on demand are kbroker's (--control)"
start_fault_broker 1 events:4
T=$(topic events)
G=$(group commits)
S=$(store state)
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 1200 -k 300 | kproduce -b "$BROKERS" -t "$T" -k .user_id

run() { expect_exit "$1" kconsume -b "$BROKERS" -t "$T" -g "$G" -c 200; cp "$WORK/out" "$WORK/r$2"; }

# The first commit is refused, and its retry too (errors queue).
fault error OffsetCommit NOT_COORDINATOR
fault error OffsetCommit REQUEST_TIMED_OUT
run 0 1
assert_empty "$WORK/err"
# Refused more often than librdkafka retries: the commit is refused.
# Depending on when the refusals land, a periodic commit is refused and the
# next one stores the offsets (exit 0, nothing said), or the one at exit is,
# and kconsume warns that those records are read again (exit 0).
fault error OffsetCommit 3 REQUEST_TIMED_OUT
status=0
kconsume -b "$BROKERS" -t "$T" -g "$G" -c 200 >"$WORK/r3" 2>"$WORK/err" || status=$?
case "$status:$(cat "$WORK/err")" in
  "0:") ;;
  "0:kconsume: warning: the group refused the offsets of "*" partition"*" at exit (rebalancing, or its coordinator out of reach): their last records are read again next time") ;;
  *) fail "kconsume after three refused commits: exit $status: $(cat "$WORK/err")" ;;
esac
run 0 4
assert_empty "$WORK/err"

# Mid-checkpoint: the pipeline's checkpoints complete in the state store and
# their offsets reach the group through refused commits.
fault error OffsetCommit 2 COORDINATOR_NOT_AVAILABLE
status=0
{ kconsume -b "$BROKERS" -t "$T" -g "$G" --state "$S" --checkpoint-interval 100ms -c 300 2>"$WORK/k.err" |
  kcheckpoint commit --state "$S" --passthrough >"$WORK/r2" 2>"$WORK/c.err"; } || status=$?
assert_eq "$status" 0 "the pipeline's exit status ($(cat "$WORK/k.err" "$WORK/c.err"))"
assert_empty "$WORK/k.err"
assert_empty "$WORK/c.err"
assert_eq "$(lines "$WORK/r2")" 300 "records through the pipeline"

# The rest, from where the group's offsets say.
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -g "$G" -e
cp "$WORK/out" "$WORK/r5"
assert_eq "$(lines "$WORK/r5")" $((1200 - 900 + $(sort "$WORK/r3" "$WORK/r4" | uniq -d | wc -l))) \
  "records the last run read"

# Nothing lost; only the failed run's records read twice.
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e
sort -u "$WORK"/r[1-5] >"$WORK/read"
sort "$WORK/out" >"$WORK/topic"
assert_files_equal "$WORK/read" "$WORK/topic"
sort "$WORK"/r[1-5] | uniq -d >"$WORK/twice"
sort "$WORK/r3" >"$WORK/r3.sorted"
[[ -z "$(comm -23 "$WORK/twice" "$WORK/r3.sorted")" ]] || fail "records read twice that the failed run did not read: $(comm -23 "$WORK/twice" "$WORK/r3.sorted" | head -n 3)"
