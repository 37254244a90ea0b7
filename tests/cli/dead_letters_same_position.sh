#!/usr/bin/env bash
# Two different dead letters from one source position (a topic made again,
# two clusters sharing a store) are two entries: the second overwrote the
# first. The same line failing again is still one entry, counted.
source "$(dirname "$0")/lib.sh"
cd "$WORK"

printf '%s\n' '{"topic":"ev","partition":0,"offset":5,"value":{"a":"first"}}' \
  '{"topic":"ev","partition":0,"offset":5,"value":{"a":"second"}}' >in.ndjson
run 0 kdlq guard --require .value.ts --dlq m.db in.ndjson
expect_stdout ''
expect_stderr 'kdlq: warning: sent 2 lines to the dead-letter store m.db
'
# The same two lines again (a pipeline reading again after a crash).
run 0 kdlq guard --require .value.ts --dlq m.db in.ndjson
run 0 kdlq list --dlq m.db --format ndjson
jq -r '[.id, .source_offset, .failures, .payload] | @tsv' out >list.tsv
diff - list.tsv <<'OUT' || fail "entries differ"
1	5	2	{"topic":"ev","partition":0,"offset":5,"value":{"a":"first"}}
2	5	2	{"topic":"ev","partition":0,"offset":5,"value":{"a":"second"}}
OUT
