#!/usr/bin/env bash
# Delivered means read by the next process, not written into a pipe
# (kpipe(7), CONTROL LINES AND CHECKPOINTS): a reader that dies takes the
# pipe's contents with it, so offsets, checkpoints and replayed marks wait
# for the reader. After the reader dies, a restart delivers every record:
# nothing is lost. And a slow reader stops no timer.
source "$(dirname "$0")/lib.sh"
start_broker ev:4 slow:1
T=$(topic ev)
N=20000
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n "$N" -k 500 >"$WORK/events.ndjson"
kproduce -b "$BROKERS" -t "$T" -k .user_id <"$WORK/events.ndjson"
jq -r .event_id "$WORK/events.ndjson" | sort >"$WORK/all.ids"

# take N: a reader that reads exactly N lines and dies. The shell's read
# takes a byte at a time from a pipe, so nothing beyond them leaves it.
take() {
  local i line
  for ((i = 0; i < $1; i++)); do
    IFS= read -r line || return 0
    printf '%s\n' "$line"
  done
}

# ids FILE...: the event ids of the envelopes (or events) in FILEs, sorted.
ids() { cat "$@" | jq -r 'select(has("$kpipe") | not) | (.value // .).event_id' | sort; }

# 1. kcheckpoint commit --passthrough: 5 lines and their checkpoint; the
# reader takes 2 and dies. The checkpoint is not complete, and the restart
# gives the reader all 5.
{
  for n in 1 2 3 4 5; do echo "{\"n\":$n}"; done
  echo '{"$kpipe":"checkpoint","id":1,"at":1,"offsets":[{"topic":"t","partition":0,"offset":5}]}'
} >"$WORK/five.ndjson"
kcheckpoint commit --state "$WORK/c.db" --passthrough "$WORK/five.ndjson" | take 2 >"$WORK/two"
assert_eq "$(wc -l <"$WORK/two")" 2 "lines the reader took"
assert_eq "$(kcheckpoint export --state "$WORK/c.db")" "" "offsets after 2 of 5 lines were read"
kcheckpoint commit --state "$WORK/c.db" --passthrough "$WORK/five.ndjson" >"$WORK/again"
assert_eq "$(wc -l <"$WORK/again")" 5 "lines after the restart"
assert_eq "$(kcheckpoint export --state "$WORK/c.db" | jq -c .offset)" 5 "offset once all were read"

# 2. kconsume -g: the reader takes 5 records of 200 and dies. The group
# commits those 5, and the next run reads the rest: none lost, none twice.
G=$(group head)
kconsume -b "$BROKERS" -t "$T" -g "$G" -c 200 | take 5 >"$WORK/g.first"
assert_eq "$(wc -l <"$WORK/g.first")" 5 "records the reader took"
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -g "$G" -e
assert_eq "$(wc -l <"$WORK/out")" $((N - 5)) "records after the restart"
ids "$WORK/g.first" "$WORK/out" >"$WORK/g.ids"
assert_files_equal "$WORK/all.ids" "$WORK/g.ids"

# 3. kdlq replay: head takes 3 lines, and only once kdlq waits for it (for
# kdlq before the fix: once the pipe was full). head reads ahead; kdlq
# gives it one line at a time. Those 3 are replayed, the rest pending.
pad=$(printf '%0100d' 0)
seq 1000 | sed "s/.*/{\"x\":&,\"pad\":\"$pad\"}/" | kdlq guard --require .id --dlq "$WORK/d.db" 2>/dev/null
mkfifo "$WORK/replay"
kdlq replay --dlq "$WORK/d.db" >"$WORK/replay" &
replay=$!
exec 4<"$WORK/replay"
waiting() {
  case "$(cat "/proc/$1/wchan" 2>/dev/null)" in *pipe_write* | *poll*) return 0 ;; esac
  return 1
}
wait_for "kdlq to wait for its reader" 30 waiting "$replay"
head -3 <&4 >"$WORK/d.first"
exec 4<&-
wait "$replay" || fail "kdlq replay failed when its reader went"
assert_eq "$(wc -l <"$WORK/d.first")" 3 "lines head printed"
expect_exit 0 kdlq stats --dlq "$WORK/d.db" --format ndjson
assert_eq "$(jq -c '[.count, .pending]' "$WORK/out")" "[1000,997]" "entries after head -3"
expect_exit 0 kdlq replay --dlq "$WORK/d.db"
assert_eq "$(jq .x "$WORK/d.first" "$WORK/out" | sort -n | tr '\n' ' ')" "$(seq 1000 | tr '\n' ' ')" \
  "every entry replayed once"

# 4. A checkpointed pipeline whose loader dies after 8000 lines: after the
# restart, every event was loaded at least once.
S=$WORK/s.db
kconsume -b "$BROKERS" -t "$T" --state "$S" --checkpoint-interval 100ms 2>"$WORK/kc.err" |
  kcheckpoint commit --state "$S" --passthrough 2>"$WORK/cc.err" | take 8000 >"$WORK/loaded.1"
assert_eq "$(wc -l <"$WORK/loaded.1")" 8000 "lines loaded before the loader died"
# The complete checkpoint covers no record the loader did not read.
covered=$(kcheckpoint export --state "$S" | jq -s 'map(.offset) | add // 0')
((covered <= 8000)) || fail "the complete checkpoint covers $covered records; the loader read 8000"
kconsume -b "$BROKERS" -t "$T" --state "$S" -e |
  kcheckpoint commit --state "$S" --passthrough >"$WORK/loaded.2"
ids "$WORK/loaded.1" "$WORK/loaded.2" | uniq >"$WORK/loaded.ids"
assert_eq "$(wc -l <"$WORK/loaded.ids")" "$N" "events ever loaded"
assert_files_equal "$WORK/all.ids" "$WORK/loaded.ids"
expect_exit 0 kcheckpoint verify --state "$S"

# 5. The same with --each and a loader that keeps a batch whole or not at
# all, and fails at the batch that would take it past 8000 lines: every
# event is kept exactly once.
E=$WORK/e.db
mkdir "$WORK/batches"
cat >"$WORK/load" <<EOF
#!/bin/sh
f=\$(mktemp -p "$WORK/batches") || exit 1
cat >"\$f" || exit 1
kept=\$(cat "$WORK"/batches/*.ndjson 2>/dev/null | wc -l)
if [ -e "$WORK/crash" ] && [ \$((kept + \$(wc -l <"\$f"))) -gt 8000 ]; then
  rm -f "\$f"
  exit 7
fi
mv "\$f" "\$f.ndjson"
EOF
chmod +x "$WORK/load"
touch "$WORK/crash"
status=0
kconsume -b "$BROKERS" -t "$T" --state "$E" --checkpoint-interval 100ms 2>/dev/null |
  kcheckpoint commit --state "$E" --each "$WORK/load" 2>"$WORK/each.err" || status=$?
assert_eq "$status" 1 "kcheckpoint's status when the loader fails"
grep -qE "^kcheckpoint: error: command '$WORK/load' exited with status 7: checkpoint [0-9]+ is not complete$" \
  "$WORK/each.err" || fail "stderr: $(cat "$WORK/each.err")"
rm "$WORK/crash"
kconsume -b "$BROKERS" -t "$T" --state "$E" -e | kcheckpoint commit --state "$E" --each "$WORK/load"
cat "$WORK"/batches/*.ndjson >"$WORK/kept"
assert_eq "$(wc -l <"$WORK/kept")" "$N" "events kept"
ids "$WORK/kept" >"$WORK/kept.ids"
assert_files_equal "$WORK/all.ids" "$WORK/kept.ids"

# 6. A slow reader stops no timer: while nothing reads kconsume's output,
# --stats lines keep coming (the counters standing still) and the group's
# commits keep up with what was read.
TS=$(topic slow)
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 3000 | kproduce -b "$BROKERS" -t "$TS"
GS=$(group slow)
mkfifo "$WORK/slow"
kconsume -b "$BROKERS" -t "$TS" -g "$GS" --stats 100ms --commit-interval 100ms \
  >"$WORK/slow" 2>"$WORK/slow.err" &
consumer=$!
exec 3<"$WORK/slow"
take 10 <&3 >/dev/null
# stalled FILE K: the last K --stats lines of FILE show the same count of
# records written, more than were read: written while kconsume waited for
# a reader that read nothing meanwhile.
stalled() {
  grep '"program":"kconsume"' "$1" | jq -r .out | tail -"$2" |
    awk -v k="$2" 'NR == 1 { first = $1 } $1 != first { moved = 1 }
      END { exit !(NR == k && !moved && first > 10) }'
}
wait_for "--stats lines while the reader does not read" 30 stalled "$WORK/slow.err" 3
# The commits came too: the group holds the 10 records read, not more.
committed() {
  klag -b "$BROKERS" -g "$GS" --format ndjson 2>/dev/null |
    jq -s 'map(select(.partition != null) | .committed // 0) | add' | grep -qx 10
}
wait_for "the commit of the 10 records read" 30 committed
kill -TERM "$consumer"
cat <&3 >/dev/null
wait "$consumer" || fail "kconsume did not stop cleanly"
exec 3<&-

# 7. kcheckpoint commit does not take a slow reader for a stage that drops
# control lines: its output waits for more than three checkpoint intervals.
mkfifo "$WORK/slow2"
{
  kconsume -b "$BROKERS" -t "$TS" --state "$WORK/slow.db" --checkpoint-interval 100ms \
    --stats 100ms 2>"$WORK/slow2.kc" &
  echo $! >"$WORK/kconsume.pid"
  wait $!
} | kcheckpoint commit --state "$WORK/slow.db" --passthrough --checkpoint-interval 100ms \
  >"$WORK/slow2" 2>"$WORK/slow2.err" &
pipeline=$!
exec 3<"$WORK/slow2"
take 10 <&3 >/dev/null
wait_for "the pipeline to wait for its reader" 30 stalled "$WORK/slow2.kc" 6
kill -TERM "$(cat "$WORK/kconsume.pid")"
cat <&3 >/dev/null
wait "$pipeline" || fail "the pipeline did not stop cleanly"
exec 3<&-
if grep -q "no checkpoint line" "$WORK/slow2.err"; then
  fail "a slow reader was taken for a stage that drops control lines: $(cat "$WORK/slow2.err")"
fi
