#!/usr/bin/env bash
# Closed standard streams and inputs that are outputs: clear errors, never
# a hang and never a file that grows without end.
source "$(dirname "$0")/lib.sh"

# With standard input closed, a program that reads it says so and exits 1
# (its own internal pipe once took fd 0, and it read itself forever).
# `timeout` turns a hang into a failure of this test.
for cmd in "kdedup -k .id" "kwindow --time .ts --key .k --tumble 1m" "kdlq guard --require .id --on-error skip" \
  "kupsert --db $WORK/u.db --table t --key id"; do
  run 1 timeout 20 $cmd <&-
  expect_stderr "${cmd%% *}: error: cannot read <stdin>: standard input is closed
"
done

# A file given as input that is also an output is refused, before anything
# is read or written.
printf '{"id":1}\n{"id":1}\n' >"$WORK/f.ndjson"
cp "$WORK/f.ndjson" "$WORK/before"
# append STATUS CMD...: as run, with standard output appended to f.ndjson.
append() {
  local want=$1 got=0
  shift
  "$@" >>"$WORK/f.ndjson" 2>"$WORK/err" || got=$?
  [[ $got == "$want" ]] || fail "'$*' exited $got, expected $want: $(cat "$WORK/err")"
}
append 2 timeout 20 kdedup -k .id "$WORK/f.ndjson"
expect_stderr "kdedup: error: input '$WORK/f.ndjson' is also standard output: the program would read what it writes
"
cmp -s "$WORK/f.ndjson" "$WORK/before" || fail "the input was written to"

# Standard input redirected from the file that standard output appends to.
append 2 timeout 20 kdedup -k .id <"$WORK/f.ndjson"
expect_stderr "kdedup: error: input <stdin> is also standard output: the program would read what it writes
"
cmp -s "$WORK/f.ndjson" "$WORK/before" || fail "the input was written to"

# An input that is also the --dups file or the --late file: refused before
# anything is read or written.
cd "$WORK"
run 2 timeout 20 kdedup -k .id --dups f.ndjson f.ndjson
expect_stderr "kdedup: error: input 'f.ndjson' is also the --dups file: the program would read what it writes
"
expect_stdout ''
cmp -s f.ndjson before || fail "the input was written to by --dups"
run 2 timeout 20 kwindow --time .id --tumble 1m --late f.ndjson f.ndjson
expect_stderr "kwindow: error: input 'f.ndjson' is also the --late file: the program would read what it writes
"
expect_stdout ''
cmp -s f.ndjson before || fail "the input was written to by --late"
# The same file as standard input.
run 2 timeout 20 kdedup -k .id --dups f.ndjson <f.ndjson
expect_stderr "kdedup: error: input <stdin> is also the --dups file: the program would read what it writes
"
cmp -s f.ndjson before || fail "the input was written to by --dups"
cd - >/dev/null
