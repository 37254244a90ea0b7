#!/usr/bin/env bash
# What every program promises: --help and --version exit 0 on stdout, a
# usage error exits 2 with one line on stderr, every long option of --help
# (and of each subcommand's --help) appears in its man page, and the man
# page's EXIT STATUS section lists the exit-status table of exit_status.h.
source "$(dirname "$0")/lib.sh"

codes=$(grep -oE 'k[A-Za-z]+ = [0-9]+' "$KPIPE_SOURCE_DIR/lib/kpipe/exit_status.h" | awk '{print $3}')
[[ -n "$codes" ]] || fail "no exit codes found in exit_status.h"

# The man page's text without roff's backslashes (\-\-state is --state).
# A file, not a pipe: `grep -q` on a pipe under pipefail fails at random.
plain_page() { sed 's/\\//g' "$1" >"$WORK/page.txt"; }

check_options_documented() {
  local prog=$1 help=$2 opt
  for opt in $(grep -oE -- '--[a-z][a-z0-9-]+' "$help" | sort -u); do
    grep -qF -- "$opt" "$WORK/page.txt" || fail "$prog: option $opt is in --help but not in its man page"
  done
}

for prog in $(programs); do
  page="$KPIPE_SOURCE_DIR/man/$prog.1"
  [[ -f "$page" ]] || fail "$prog has no man page man/$prog.1"
  [[ -f "$KPIPE_SOURCE_DIR/completions/$prog" ]] || fail "$prog has no bash completion completions/$prog"

  plain_page "$page"
  run 0 "$prog" --help
  expect_no_stderr
  grep -q "^Usage: $prog" "$WORK/out" || fail "$prog --help has no usage line"
  cp "$WORK/out" "$WORK/help"
  check_options_documented "$prog" "$WORK/help"

  run 0 "$prog" --version
  expect_no_stderr
  head -1 "$WORK/out" | grep -qE "^$prog \(kpipe\) [0-9]+\.[0-9]+\.[0-9]+$" || fail "$prog --version: $(head -1 "$WORK/out")"

  run 2 "$prog" --no-such-option
  [[ ! -s "$WORK/out" ]] || fail "$prog: a usage error wrote to stdout"
  [[ $(wc -l <"$WORK/err") -eq 1 ]] || fail "$prog: a usage error is not one line: $(cat "$WORK/err")"
  grep -q "^$prog: error: " "$WORK/err" || fail "$prog: usage error not in the form 'PROG: error: ...': $(cat "$WORK/err")"

  # Subcommands (kcheckpoint, kdlq, klag): the completion helper lists them.
  run 0 "$prog" --completion-helper
  for sub in $(grep -v '^--' "$WORK/out" || true); do
    run 0 "$prog" "$sub" --help
    cp "$WORK/out" "$WORK/help"
    check_options_documented "$prog $sub" "$WORK/help"
    grep -qE "(^|[^a-z])$sub([^a-z]|$)" "$WORK/page.txt" || fail "$prog: subcommand $sub is not in the man page"
  done

  # EXIT STATUS lists every code of the one table.
  section=$(awk '/^\.SH "?EXIT STATUS"?/{on=1; next} /^\.SH/{on=0} on' "$page")
  [[ -n "$section" ]] || fail "$prog: man page has no EXIT STATUS section"
  for code in $codes; do
    grep -qE "(^|[^0-9])$code([^0-9]|$)" <<<"$section" || fail "$prog: EXIT STATUS does not mention $code"
  done
done

# kpipe(7) documents the shared conventions.
[[ -f "$KPIPE_SOURCE_DIR/man/kpipe.7" ]] || fail "man/kpipe.7 is missing"
