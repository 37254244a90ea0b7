#!/usr/bin/env bash
# The README's opening table, a newcomer's first look at the programs, says
# what each does as its man page does: every program has a row, and every
# store its man page's NAME line names (SQLite, PostgreSQL) is named in its
# row. The table said "SQLite" alone for kupsert and kcheckpoint long after
# both kept their data in PostgreSQL too.
source "$(dirname "$0")/lib.sh"

readme=$KPIPE_SOURCE_DIR/README.md
# The table: the first block of lines that start with '|'.
awk '/^\|/ { found = 1; print; next } found { exit }' "$readme" >"$WORK/table"
[[ -s "$WORK/table" ]] || fail "no table in README.md"

for prog in $(programs); do
  row=$(grep -E "^\|[^|]*\`$prog\`" "$WORK/table" || true)
  [[ -n "$row" ]] || fail "README.md's table has no row for $prog"
  (($(wc -l <<<"$row") == 1)) || fail "README.md's table has more than one row for $prog"
  name=$(sed -n '/^\.SH NAME/{n;p;q}' "$KPIPE_SOURCE_DIR/man/$prog.1")
  [[ -n "$name" ]] || fail "man/$prog.1 has no NAME line"
  for store in SQLite PostgreSQL; do
    [[ $name != *"$store"* || $row == *"$store"* ]] ||
      fail "README.md's row for $prog does not name $store, which man/$prog.1 does ($name): $row"
  done
done
