#!/usr/bin/env bash
# The commit point is Kafka's transaction (kpipe(7), EXACTLY ONCE INTO
# KAFKA): a kproduce --transactional that commits a checkpoint in Kafka and
# then cannot complete it in the state store (here: another process holds
# the SQLite file's write lock) leaves the store one checkpoint behind
# Kafka. The next run's kconsume completes that checkpoint from the group's
# offsets before it resumes, and kdedup restores that checkpoint's state:
# the records of the checkpoint are neither written again nor let through
# again as new.
source "$(dirname "$0")/lib.sh"
requires_broker kafka "kbroker (librdkafka's mock cluster) does not keep the offsets a transaction commits"
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3"; exit 77; }
start_broker events:4 clean:4
SRC=$(topic events)
OUT=$(topic clean)
G=$(group repair)
S="$WORK/state.db"

"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 3000 -k 50 -s 11 >"$WORK/events.ndjson"
head -1000 "$WORK/events.ndjson" >"$WORK/first"
sed -n 1001,2000p "$WORK/events.ndjson" >"$WORK/second"
# The third batch repeats the second's first 200 events: only kdedup's
# state of the repaired checkpoint drops them.
{ head -200 "$WORK/second"; sed -n 2001,3000p "$WORK/events.ndjson"; } >"$WORK/third"

dedup=(kdedup --key .value.event_id --state "$S")
produce=(kproduce -b "$BROKERS" -t "$OUT" --envelope --keep-partition --transactional --state "$S")
completed() { sqlite3 -readonly "$S" "SELECT COALESCE(MAX(id), 0) FROM checkpoints WHERE completed_at IS NOT NULL"; }

# 1. A first run to the end: every checkpoint complete.
expect_exit 0 kproduce -b "$BROKERS" -t "$SRC" -k .user_id "$WORK/first"
kconsume -b "$BROKERS" -t "$SRC" -g "$G" --state "$S" -e 2>"$WORK/run1.err" | "${dedup[@]}" 2>>"$WORK/run1.err" |
  "${produce[@]}" >/dev/null 2>>"$WORK/run1.err" || fail "the first run failed: $(cat "$WORK/run1.err")"
before=$(completed)

# 2. The second batch through kconsume and kdedup only, into a file: their
# lines end with kconsume's final checkpoint, which nothing completes (so
# kconsume, waiting for it, is killed once the line is there).
expect_exit 0 kproduce -b "$BROKERS" -t "$SRC" -k .user_id "$WORK/second"
{
  # Killed, it stays in the group for the session timeout: a short one.
  kconsume -b "$BROKERS" -t "$SRC" -g "$G" --state "$S" -e --checkpoint-interval 1h \
    -X session.timeout.ms=6000 2>"$WORK/run2.err" &
  echo $! >"$WORK/kconsume.pid"
  wait $! 2>/dev/null || true # (no "Killed" notice)
} | "${dedup[@]}" >"$WORK/lines" 2>>"$WORK/run2.err" &
half=$!
has_checkpoint() { grep -q '^{"$kpipe":"checkpoint"' "$WORK/lines"; }
wait_for "kconsume's final checkpoint line" 60 has_checkpoint
kill -KILL "$(cat "$WORK/kconsume.pid")" 2>/dev/null || true
wait "$half" || fail "kdedup failed: $(cat "$WORK/run2.err")"
assert_eq "$(grep -vc '"$kpipe"' "$WORK/lines")" 1000 "records of the second batch"

# 3. kproduce commits that checkpoint in Kafka while another process holds
# the state file's write lock: completing it there fails (SQLite's busy
# timeout), after Kafka's commit.
mkfifo "$WORK/in.fifo"
"${produce[@]}" -v <"$WORK/in.fifo" >/dev/null 2>"$WORK/run3.err" &
producer=$!
exec 3>"$WORK/in.fifo"
# The lines begin with kconsume's instance line, from which kproduce takes
# its transactional id (kpipe(7), MANY INSTANCES).
head -1 "$WORK/lines" >&3
started() { grep -q "transactional id" "$WORK/run3.err"; }
wait_for "kproduce to start its transactions" 60 started
coproc LOCK { sqlite3 "$S"; }
# Bash unsets LOCK_PID once it has reaped the coprocess, which may be
# before the wait below (found by a fresh run: "LOCK_PID: unbound variable").
lock_pid=$LOCK_PID
echo 'BEGIN EXCLUSIVE; SELECT 1;' >&"${LOCK[1]}"
read -r -t 30 locked <&"${LOCK[0]}" || fail "could not lock the state file"
tail -n +2 "$WORK/lines" >&3
exec 3>&-
status=0
wait "$producer" || status=$?
echo 'ROLLBACK;' >&"${LOCK[1]}"
exec {LOCK[1]}>&-
wait "$lock_pid" 2>/dev/null || true
assert_eq "$status" 1 "kproduce's exit status when the store is locked"
grep -q "^kproduce: error: .*locked" "$WORK/run3.err" || fail "kproduce did not say why: $(cat "$WORK/run3.err")"
assert_eq "$(completed)" "$before" "the store's newest complete checkpoint"
# Kafka has it: the group's offsets are at the end of the second batch.
klag -b "$BROKERS" -g "$G" -t "$SRC" --format ndjson >"$WORK/lag" 2>"$WORK/lag.err" || true
assert_eq "$(jq -s 'map(select(.partition != null and .lag == 0)) | length' "$WORK/lag")" 4 \
  "partitions of the group at the end of the source (klag: $(cat "$WORK/lag" "$WORK/lag.err"))"

# 4. The third batch, and the pipeline again: kconsume completes the
# checkpoint Kafka committed, and everything resumes from it.
expect_exit 0 kproduce -b "$BROKERS" -t "$SRC" -k .user_id "$WORK/third"
kconsume -b "$BROKERS" -t "$SRC" -g "$G" --state "$S" -e -v 2>"$WORK/run4.err" |
  "${dedup[@]}" -v 2>"$WORK/run4-dedup.err" | "${produce[@]}" >/dev/null 2>"$WORK/run4-produce.err" ||
  fail "the last run failed: $(cat "$WORK"/run4*.err)"
grep -q "checkpoint $((before + 1)) was committed in Kafka by group '$G' but not complete in '$S': completed now" "$WORK/run4.err" ||
  fail "kconsume did not complete the committed checkpoint: $(cat "$WORK/run4.err")"
grep -q "from checkpoint $((before + 1)) in" "$WORK/run4-dedup.err" ||
  fail "kdedup did not restore the committed checkpoint: $(cat "$WORK/run4-dedup.err")"

kconsume -b "$BROKERS" -t "$OUT" -e | jq -r .value.event_id | sort >"$WORK/got"
jq -r .event_id "$WORK/events.ndjson" | sort -u >"$WORK/want"
assert_files_equal "$WORK/want" "$WORK/got"
expect_exit 0 kcheckpoint verify --state "$S"
echo "transactions_repair: ok"
