#!/usr/bin/env bash
# A corpus of hostile lines through every program with --on-error dlq:
# every line a program cannot use lands in the store byte for byte, with a
# reason naming its line; every other line comes out; the counts add up.
# Under the default --on-error fail, the program exits 65 naming the first
# bad line.
#
# A program joins with one `covers` line at the bottom: its name, its stage
# in the store, the categories of the corpus that are bad for it, what its
# output holds (`lines`: the good lines themselves; `count`: aggregates
# whose .count add up to the good lines), and the command (reading standard
# input, writing to standard output; --max-line-bytes, --on-error and --dlq
# are appended). Filters check a line as far as they read it (kpipe(7)), so
# a deep nesting that no path reaches is good for them; the guard checks all.
source "$(dirname "$0")/lib.sh"
start_broker produced-dlq:1 produced-fail:1

MAX=4096
CORPUS="$WORK/corpus.ndjson"
CATEGORIES=()
: >"$CORPUS"

# add CATEGORY FORMAT: one line of the corpus, written by printf (so \t,
# \x00 and \xff are the bytes themselves).
add() {
  CATEGORIES+=("$1")
  # shellcheck disable=SC2059
  printf -- "$2\n" >>"$CORPUS"
}

add good '{"user_id":"u1","ts":1795946400010,"amount":335}'
add truncated '{"user_id":"u2","ts":17959'
add good '{"user_id":"u3","ts":"2026-11-29T10:15:30.123Z","amount":7,"tags":["a","b"]}'
add truncated '{"user_id":"u4","ts":1795946400010,"amount":3'
add utf8 '{"user_id":"u\xff5","ts":1795946400010,"amount":1}'
add utf8 '{"user_id":"u6","ts":1795946400010,"amount":1,"note":"\xc3\x28"}'
add binary '\x00\x01\x02\xfe\xffbinary\x00with NULs'
add binary '{"user_id":"u7\x00","ts":1795946400010,"amount":1}'
add toolong "{\"user_id\":\"u8\",\"ts\":1795946400010,\"amount\":1,\"pad\":\"$(printf 'x%.0s' $(seq 5000))\"}"
add type_key '{"user_id":42,"ts":1795946400010,"amount":1}'
add type_time '{"user_id":"u9","ts":"yesterday","amount":1}'
add type_amount '{"user_id":"u10","ts":1795946400010,"amount":"12"}'
add good '{"user_id":"u11","ts":1795946400011,"amount":0,"note":"caf\\u00e9 and caf\xc3\xa9"}'
add missing_key '{"ts":1795946400010,"amount":1}'
add missing_time '{"user_id":"u12","amount":1}'
add control '{"user_id":"u13","ts":1795946400010,"amount":1,"note":"tab\there"}'
add control '{"user_id":"u14","ts":1795946400010,"amount":1,"note":"bell\x07"}'
add deep "{\"user_id\":\"u15\",\"ts\":1795946400010,\"amount\":1,\"deep\":$(printf '[%.0s' $(seq 1100))$(printf ']%.0s' $(seq 1100))}"
add not_object '42'
add not_object '"just a string"'
add not_object 'null'
add not_object '[{"user_id":"u16"}]'
add good '{ "user_id" : "u17",  "ts" : 1795946400012 , "amount" : 4 }'
[[ $(wc -l <"$CORPUS") -eq ${#CATEGORIES[@]} ]] || fail "the corpus has a line break inside a line"

SYNTAX="truncated utf8 binary toolong control deep"
EVERY="$SYNTAX type_key type_time type_amount missing_key missing_time not_object"
COVERED=()

# kproduce's output is a topic: produce, then read the values back raw.
produce_and_read() {
  local t
  t=$(topic "produced-$MODE")
  kproduce -b "$BROKERS" -t "$t" -k .user_id "$@" || return
  kcat -b "$BROKERS" -C -t "$t" -e -q -f '%s\n'
}

covers() {
  local name=$1 stage=$2 bad=" $3 " output=$4
  shift 4
  local prog=${name%% *} db="$WORK/$stage.db" i first_bad=""
  : >"$WORK/want.bad"
  : >"$WORK/want.good"
  : >"$WORK/want.lines"
  for i in "${!CATEGORIES[@]}"; do
    local n=$((i + 1))
    if [[ $bad == *" ${CATEGORIES[$i]} "* ]]; then
      sed -n "${n}p" "$CORPUS" >>"$WORK/want.bad"
      echo "$n" >>"$WORK/want.lines"
      [[ -n $first_bad ]] || first_bad=$n
    else
      sed -n "${n}p" "$CORPUS" >>"$WORK/want.good"
    fi
  done
  local nbad ngood
  nbad=$(wc -l <"$WORK/want.bad")
  ngood=$(wc -l <"$WORK/want.good")

  MODE=dlq
  expect_exit 0 "$@" --max-line-bytes "$MAX" --on-error dlq --dlq "$db" <"$CORPUS"
  assert_eq "$(cat "$WORK/err")" "$prog: warning: sent $nbad lines to the dead-letter store $db" "$name: stderr"
  if [[ $output == lines ]]; then
    # Every good line out, byte for byte (a topic's order is its partitions').
    diff <(LC_ALL=C sort "$WORK/want.good") <(LC_ALL=C sort "$WORK/out") >&2 || fail "$name: the good lines differ"
  else
    assert_eq "$(jq -s 'map(.count) | add' "$WORK/out")" "$ngood" "$name: good lines counted in the output"
  fi
  # Every bad line in the store, byte for byte, in order, each with a reason.
  expect_exit 0 kdlq replay --dlq "$db" --dry-run --format ndjson
  jq -r '.line' "$WORK/out" >"$WORK/got.lines"
  assert_files_equal "$WORK/want.lines" "$WORK/got.lines"
  jq -r --arg stage "$stage" \
    'select(.stage != $stage or
            (.line as $n | .reason | test("^line \($n): .{8,}") | not)) | "\(.line): \(.reason)"' \
    "$WORK/out" >"$WORK/bad.reasons"
  assert_empty "$WORK/bad.reasons"
  expect_exit 0 kdlq replay --dlq "$db"
  assert_files_equal "$WORK/want.bad" "$WORK/out"
  local stored
  stored=$(wc -l <"$WORK/out")
  assert_eq "$((stored + ngood))" "${#CATEGORIES[@]}" "$name: stored + passed"
  assert_eq "$stored" "$nbad" "$name: stored"

  # The default, --on-error fail: exit 65, naming the first bad line.
  MODE=fail
  expect_exit 65 "$@" --max-line-bytes "$MAX" <"$CORPUS"
  grep -q "^$prog: error: <stdin>: line $first_bad: " "$WORK/err" ||
    fail "$name: --on-error fail did not name line $first_bad: $(cat "$WORK/err")"
  COVERED+=("$name")
}

covers kproduce kproduce "$SYNTAX missing_key not_object" lines produce_and_read
covers "kdlq guard" kdlq-guard "$EVERY" lines \
  kdlq guard --require .user_id:string --require .ts:time --require .amount:integer
covers kwindow kwindow "${SYNTAX% deep} type_time missing_key missing_time not_object" count \
  kwindow --time .ts -k .user_id --tumble 1000d --agg count
# Programs from other branches join here, one line each, e.g.:
# covers kdedup kdedup "$SYNTAX missing_key not_object" lines kdedup -k .user_id
# covers kupsert kupsert "..." lines kupsert_and_select ...

echo "hostile corpus (${#CATEGORIES[@]} lines) through: ${COVERED[*]}"
