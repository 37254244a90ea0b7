#!/usr/bin/env bash
# kdedup on kconsume envelopes keyed by .value.event_id: the first envelope
# of each event passes byte for byte; with --state, a pipeline that stops,
# is replayed after a run whose checkpoints never completed, and resumes,
# delivers every event exactly once.
source "$(dirname "$0")/lib.sh"
start_broker events:3
T=$(topic events)
GEN="$KPIPE_SOURCE_DIR/scripts/gen-events"

# 600 events, a fifth of them producer retries (same event_id, same bytes).
"$GEN" -n 600 -k 40 -r 0.2 -s 11 >"$WORK/batch1"
expect_exit 0 kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/batch1"

# --- the envelopes as kconsume writes them ---------------------------------
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e
cp "$WORK/out" "$WORK/consumed"
expect_exit 0 kdedup -k .value.event_id -v "$WORK/consumed"
cp "$WORK/out" "$WORK/deduped"
# What kdedup should keep: the first line of each event_id, as read.
jq -r '.value.event_id' "$WORK/consumed" | paste -d ' ' - "$WORK/consumed" |
  awk '!seen[$1]++ { sub(/^[^ ]* /, ""); print }' >"$WORK/expected"
assert_files_equal "$WORK/deduped" "$WORK/expected"
distinct=$(jq -r .event_id "$WORK/batch1" | sort -u | wc -l)
assert_eq "$(wc -l <"$WORK/deduped")" "$distinct" "events after kdedup"
[[ $distinct -lt 600 ]] || fail "the sample has no repeats"
assert_eq "$(cat "$WORK/err")" \
  "kdedup: 600 records in, $distinct passed, $((600 - distinct)) dropped; $distinct keys remembered, 0 evicted" "summary"

# --- checkpoints: stop, replay, resume -------------------------------------------
S="$WORK/state.db"
pipeline() {  # pipeline OUT [kconsume options...]
  local out=$1
  shift
  kconsume -b "$BROKERS" -t "$T" --state "$S" "$@" |
    kdedup -k .value.event_id --within 1h --time .value.ts --state "$S" -v 2>>"$WORK/kdedup.err" |
    kcheckpoint commit --state "$S" --passthrough >"$out"
}

# The first 300 records, then a stop: the final checkpoint completes.
pipeline "$WORK/out1" -c 300
[[ -s "$WORK/out1" ]] || fail "the first run delivered nothing"
assert_eq "$(jq -r .value.event_id "$WORK/out1" | sort | uniq -d)" "" "events repeated by the first run"

# More events, among them replays of the first batch.
{
  head -150 "$WORK/batch1"
  "$GEN" -n 200 -k 40 -s 12 -t 1795946406000 | sed 's/"event_id":"e/"event_id":"f/'
} >"$WORK/batch2"
expect_exit 0 kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/batch2"

# A run whose output never reaches the terminal stage: kdedup saves
# snapshots for checkpoints that never complete. Restoring them would lose
# the records it saw, which the next run replays.
kconsume -b "$BROKERS" -t "$T" --state "$S" -e |
  kdedup -k .value.event_id --within 1h --time .value.ts --state "$S" >/dev/null
kcheckpoint history --state "$S" --format ndjson >"$WORK/history"
jq -e 'select(.completed_at == null) | .snapshots[] | select(.stage == "kdedup")' "$WORK/history" >/dev/null ||
  fail "the interrupted run saved no snapshot: $(cat "$WORK/history")"
# Each complete checkpoint says how long it took, and each snapshot when,
# after the barrier, its stage saved it: within that time.
jq -e -s 'map(select(.completed_at != null)) | length > 0 and all(.[]; . as $c |
    $c.took_ms >= 0 and all($c.snapshots[]; .saved_after_ms >= 0 and .saved_after_ms <= $c.took_ms))' \
  "$WORK/history" >/dev/null || fail "checkpoint durations: $(cat "$WORK/history")"
jq -e -s 'all(.[] | select(.completed_at == null); .took_ms == null)' "$WORK/history" >/dev/null ||
  fail "an incomplete checkpoint has a duration: $(cat "$WORK/history")"

# The resumed run delivers the rest; across both runs, each event once.
pipeline "$WORK/out2" -e
cat "$WORK/out1" "$WORK/out2" | jq -r .value.event_id | sort >"$WORK/delivered"
cat "$WORK/batch1" "$WORK/batch2" | jq -r .event_id | sort -u >"$WORK/all"
assert_files_equal "$WORK/delivered" "$WORK/all"
# The second run started from the first run's keys, not from the
# interrupted run's.
first_complete=$(jq -r 'select(.completed_at != null) | .checkpoint' "$WORK/history" | tail -1)
grep -q "^kdedup: restored $(wc -l <"$WORK/out1") keys of 'kdedup' from checkpoint $first_complete in '$S'\$" \
  "$WORK/kdedup.err" || fail "no restore of checkpoint $first_complete: $(cat "$WORK/kdedup.err")"
