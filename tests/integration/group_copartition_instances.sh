#!/usr/bin/env bash
# Co-partitioning across instances (kpipe(7), MANY INSTANCES): two
# instances of one pipeline share a topic of two partitions, one each.
# Within an instance no key is split (it owns one partition), but every
# record was written to both partitions (kproduce -p), so every key is
# split between the two instances. Only the shared store sees both: kdedup
# and kwindow warn, once per instance at most, naming a key, both
# partitions and the re-key command. On the same events keyed by user,
# neither warns.
source "$(dirname "$0")/lib.sh"
start_broker split:2 keyed:2
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 2000 -k 50 -r 0.05 -s 5 >"$WORK/events.ndjson"
N=$(wc -l <"$WORK/events.ndjson")

# run_case NAME PRODUCE...: instances a-NAME and b-NAME over topic NAME,
# one partition each, then the events written by PRODUCE (a kproduce
# command without its topic), read to their end.
run_case() {
  local name=$1
  shift
  T=$(topic "$name")
  S=$(store "$name")
  G=$(group "$name")
  cat >"$WORK/instance.sh" <<PIPE
#!/usr/bin/env bash
name=\$1
kconsume -b "$BROKERS" -t "$T" -g "$G" --state "$S" --checkpoint-interval 200ms 2>>"$WORK/\$name.err" |
  kdedup -k .value.event_id --state "$S" 2>>"$WORK/\$name.err" |
  kwindow --time .value.ts --key .value.user_id --tumble 1m --state "$S" 2>>"$WORK/\$name.err" |
  kcheckpoint commit --state "$S" >/dev/null 2>>"$WORK/\$name.err"
PIPE
  start "a-$name"
  owns_both() { (($(owns "a-$name") == 2)); }
  wait_for "instance a-$name to own both partitions" 90 owns_both
  start "b-$name"
  # The range assignor gives each of two members one of two partitions.
  one_each() { (($(owns "a-$name") == 1 && $(owns "b-$name") == 1)); }
  wait_for "instances a-$name and b-$name to own one partition each" 90 one_each
  "$@" -b "$BROKERS" -t "$T" "$WORK/events.ndjson" || fail "kproduce failed"
  # A checkpoint complete past every record: each stage saved its samples
  # (it records them before it passes the checkpoint line on).
  all_read() { (($(consumed) == want)); }
  wait_for "both instances to read every record" 120 all_read
  one_each || fail "the partitions moved while the records were read: $(cat "$WORK"/*-"$name".err)"
  stop "a-$name"
  stop "b-$name"
}

# Every record in both partitions: every key is split between a and b.
produce_twice() {
  kproduce -p 0 "$@" && kproduce -p 1 "$@"
}
want=$((2 * N))
run_case split produce_twice
warnings() { cat "$WORK"/a-split.err "$WORK"/b-split.err | grep -c "$1" || true; }
dedup_warning="so duplicates across partitions pass"
window_warning="so each counts its own share of the key"
(($(warnings "$dedup_warning") >= 1)) || fail "kdedup did not warn of keys split between instances: $(cat "$WORK"/*-split.err)"
(($(warnings "$window_warning") >= 1)) || fail "kwindow did not warn of keys split between instances: $(cat "$WORK"/*-split.err)"
for err in "$WORK"/a-split.err "$WORK"/b-split.err; do
  for w in "$dedup_warning" "$window_warning"; do
    (($(grep -c "$w" "$err") <= 1)) || fail "more than one warning '$w' in $err: $(cat "$err")"
  done
done
grep -h "$dedup_warning" "$WORK"/*-split.err | head -1 >"$WORK/dedup.warning"
grep -qF -e "came from partitions $T [0] and $T [1]" -e "came from partitions $T [1] and $T [0]" "$WORK/dedup.warning" ||
  fail "the warning does not name both partitions: $(cat "$WORK/dedup.warning")"
assert_contains "$WORK/dedup.warning" "re-key the topic by it first: kconsume -t $T --format value | kproduce -t $T-rekeyed -k .event_id"
grep -h "$window_warning" "$WORK"/*-split.err | head -1 >"$WORK/window.warning"
assert_contains "$WORK/window.warning" "-k .user_id"
grep -q 'key "' "$WORK/window.warning" || fail "the warning names no key: $(cat "$WORK/window.warning")"
cat "$WORK/dedup.warning" "$WORK/window.warning"

want=$N
run_case keyed kproduce -k .user_id
grep -h 'came from partitions' "$WORK"/*-keyed.err && fail "a warning on the topic keyed by user"
echo "group_copartition_instances: ok"
