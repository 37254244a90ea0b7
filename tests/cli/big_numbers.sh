#!/usr/bin/env bash
# Integers beyond 64 bits and numbers beyond a double are valid JSON (jq
# reads them): every program passes their text on untouched, and fails only
# where it must compute with one, saying so.
source "$(dirname "$0")/lib.sh"
cd "$WORK"

big=123456789012345678901234567890
printf '%s\n' "{\"id\":\"a\",\"ts\":1000,\"tx\":$big,\"e\":1e309}" \
  "{\"id\":\"b\",\"ts\":2000,\"tx\":-$big,\"e\":-1E400}" >in.ndjson

# kdlq guard: it called them "malformed number".
run 0 kdlq guard --require .tx:number --require .e:integer --require .id in.ndjson
cmp out in.ndjson || fail "guard changed or dropped the lines: $(cat out)"
expect_no_stderr

# kdedup: keyed by their text.
printf '{"k":1e309}\n{"k":1e400}\n{"k":1e309}\n' | run 0 kdedup --key .k
expect_stdout '{"k":1e309}
{"k":1e400}
'
expect_no_stderr

# kwindow counts them, and refuses to add one it cannot hold.
run 0 kwindow --time .ts --key .id --tumble 1m --agg count in.ndjson
expect_no_stderr
printf '{"ts":1000,"v":1e400}\n' | run 65 kwindow --time .ts --tumble 1m --agg sum:.v
grep -q "^kwindow: error: <stdin>: line 1: field '.v' is 1e400, " "$WORK/err" ||
  fail "sum: $(cat "$WORK/err")"
