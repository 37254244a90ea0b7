#!/usr/bin/env bash
# Runs the filter built from core and stage alone (stage_only.cpp): good
# lines transformed, control lines passed on, a bad line skipped and
# counted, blank lines ignored.
set -euo pipefail
bin=$1
err=$(mktemp)
trap 'rm -f "$err"' EXIT
out=$(printf '%s\n' '{"name":"ada"}' '{"$kpipe":"checkpoint","id":1}' '{"name":1}' '' '{"name":"bob"}' |
  "$bin" 2>"$err") || { cat "$err"; exit 1; }
expected=$(printf '%s\n' ADA '{"$kpipe":"checkpoint","id":1}' BOB)
if [[ $out != "$expected" ]]; then
  printf 'stage_only: got\n%s\nexpected\n%s\n' "$out" "$expected"
  exit 1
fi
grep -q 'skipped 1 bad line' "$err" || { echo "stage_only: no summary of the skipped line:"; cat "$err"; exit 1; }
echo "stage_only: ok"
