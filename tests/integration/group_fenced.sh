#!/usr/bin/env bash
# Fencing (kpipe(7), MANY INSTANCES): an instance of a consumer group of
# pipelines is paused with SIGSTOP past its session timeout, with a
# checkpoint line in flight in its pipes; the group gives its partitions
# to the other instance, which takes them over in the state store and goes
# on. Resumed with SIGCONT, the paused instance's stages meet that old
# checkpoint: its snapshots and its completion carry the old epochs, and
# the store refuses them (fenced, exit 1), so that nothing it does after
# resuming changes the state or the table. The table must equal one clean
# pass over the deduplicated input.
source "$(dirname "$0")/lib.sh"
start_broker ev:12
T=$(topic ev)
G=$(group clicks)
S=$(store pipeline)
seed=${KPIPE_GROUP_SEED:-$RANDOM}
echo "fencing test seed: $seed (rerun with KPIPE_GROUP_SEED=$seed)"

"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 60000 -k 500 -r 0.03 -j 2000 -s "$seed" >"$WORK/events.ndjson"
split -n l/2 -d "$WORK/events.ndjson" "$WORK/chunk."
produced=0
produce() {
  kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/chunk.0$1" || fail "kproduce failed"
  produced=$((produced + $(wc -l <"$WORK/chunk.0$1")))
}

session=()
[[ "$KPIPE_TEST_BROKER" == kafka ]] && session=(-X session.timeout.ms=6000)

cat >"$WORK/instance.sh" <<PIPE
#!/usr/bin/env bash
name=\$1
shift
kconsume -b "$BROKERS" -t "$T" -g "$G" --state "$S" --checkpoint-interval 200ms -v ${session[*]} "\$@" 2>>"$WORK/\$name.err" |
  kdedup -k .value.event_id --state "$S" 2>>"$WORK/\$name.err" |
  kwindow --time .value.ts --key .value.user_id --tumble 1m --watermark 5s --agg count \
    --time-format ms --state "$S" \${KWINDOW_EXTRA:-} 2>>"$WORK/\$name.err" |
  kupsert --db "$S" --table clicks --key window_start,key --state "$S" 2>>"$WORK/\$name.err"
PIPE

declare -A sessions
start() {
  start_session "$WORK/instance.sh" "$1"
  sessions[$1]=$SESSION
}
pid_of() { pgrep -s "${sessions[$1]}" -x "$2" || true; }
owns() { sql "$S" "SELECT COUNT(*) FROM partition_owners WHERE pid = $1" 2>/dev/null || echo 0; }
has_partitions() { (($(owns "$(pid_of "$1" kconsume)") > 0)); }
owns_all() { (($(owns "$(pid_of "$1" kconsume)") == 12)); }
gone() { [[ -z "$(ps -o stat= -s "${sessions[$1]}" | grep -v '^Z')" ]]; }
all_consumed() { (($(consumed) == produced)); }
# The newest checkpoint a kconsume (by pid) has emitted.
emitted_by() {
  sql "$S" "SELECT COALESCE(MAX(last_checkpoint), 0) FROM kpipe_runs WHERE role LIKE 'member:kconsume:%' AND pid = $1" 2>/dev/null || echo 0
}

produce 0
start a
start b
wait_for "instance a to own partitions" 90 has_partitions a
wait_for "instance b to own partitions" 90 has_partitions b
wait_for "the first records to be consumed" 120 all_consumed

# a's stages stop first, then its kconsume once it has emitted one more
# checkpoint: that line waits in a's pipe, with a's epochs.
a_consume=$(pid_of a kconsume)
stages=()
for p in kdedup kwindow kupsert; do stages+=("$(pid_of a "$p")"); done
kill -STOP "${stages[@]}"
before=$(emitted_by "$a_consume")
more_emitted() { (($(emitted_by "$a_consume") > before)); }
wait_for "a's kconsume to emit a checkpoint" 30 more_emitted
kill -STOP "$a_consume"

# Past a's session timeout, b takes every partition over.
wait_for "b to own every partition" 90 owns_all b
produce 1
wait_for "b to consume the rest" 120 all_consumed
sql "$S" "SELECT window_start, key, count FROM clicks" | sort >"$WORK/before_resume"

kill -CONT "$a_consume" "${stages[@]}"
wait_stopped "the resumed instance a to stop" 60 "${sessions[a]}"
# kdedup meets the old checkpoint first and is fenced. Or, on PostgreSQL,
# it was stopped inside a transaction (a save, which holds the owners' rows
# FOR SHARE): the server ended that session after 30 seconds so that b's
# take-over could go on, and kdedup, running again, finds its connection
# gone (kpipe(7), MANY INSTANCES). Either way it exits 1 and writes nothing.
if [[ "$KPIPE_TEST_STORE" == postgres ]] && grep -q "^kdedup: error: .*: lost the connection" "$WORK/a.err"; then
  assert_contains "$WORK/a.err" "s inside a transaction: the server ends a session idle in a transaction at 30 s"
else
  assert_contains "$WORK/a.err" "kdedup: error: the snapshot of 'kdedup' for checkpoint"
fi
# Nothing a did after resuming reached the table: b has not written since.
sql "$S" "SELECT window_start, key, count FROM clicks" | sort >"$WORK/after_resume"
assert_files_equal "$WORK/before_resume" "$WORK/after_resume"

kill -TERM "$(pid_of b kconsume)"
wait_for "instance b to stop" 60 gone b
# The drain gets every partition only once no member holds any: the
# resumed a may have rejoined the group as it ended, and b been stopped in
# that rebalance, each then a static member kept until its session timed
# out. (A drain given only some partitions would end at the group's end
# and leave the others' windows in the store unfired.)
[[ "$KPIPE_TEST_BROKER" != kafka ]] || wait_for "the group to have no member" 60 no_member "$G"
KWINDOW_EXTRA=--flush-at-end bash "$WORK/instance.sh" z -e || fail "the drain failed: $(cat "$WORK/z.err")"
grep -q 'error' "$WORK/b.err" "$WORK/z.err" && fail "errors: $(cat "$WORK/b.err" "$WORK/z.err")"

kdedup --key .event_id <"$WORK/events.ndjson" |
  kwindow --time .ts --key .user_id --tumble 1m --watermark 5s --agg count --time-format ms |
  jq -r '[.window_start, .key, .count] | @tsv' | sort >"$WORK/want"
sql "$S" "SELECT window_start, key, count FROM clicks" | tr '|' '\t' | sort >"$WORK/got"
assert_files_equal "$WORK/want" "$WORK/got"
expect_exit 0 kcheckpoint verify --state "$S"
echo "group_fenced: ok ($(grep -h "error:" "$WORK/a.err" | head -1))"
