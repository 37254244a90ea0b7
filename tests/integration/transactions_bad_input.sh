#!/usr/bin/env bash
# Bad input under kproduce --transactional (kproduce(1), TRANSACTIONS): a
# record too large for message.max.bytes is refused before it is sent, so
# --on-error takes it (here: the dead-letter store) and the transaction
# commits the others with the checkpoint.
source "$(dirname "$0")/lib.sh"
start_broker source:1 out:1
OUT=$(topic out)
S=$(store state)
D=$(store dead)
big=$(head -c 2000000 /dev/zero | tr '\0' x)
{
  echo '{"n":1}'
  echo "{\"n\":2,\"pad\":\"$big\"}"
  echo '{"n":3}'
  printf '{"$kpipe":"checkpoint","id":1,"at":5,"group":"%s","offsets":[{"topic":"%s","partition":0,"offset":3}]}\n' \
    "$(group bad)" "$(topic source)"
} >"$WORK/in.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$OUT" --transactional --state "$S" --dlq "$D" -v "$WORK/in.ndjson"
grep -q "sent 1 line to the dead-letter store" "$WORK/err" || fail "no dead letter said: $(cat "$WORK/err")"
grep -q "committed 1 transactions of 2 records to '$OUT'" "$WORK/err" || fail "not committed: $(cat "$WORK/err")"
assert_eq "$(kconsume -b "$BROKERS" -t "$OUT" -e --format value | jq -c -s 'map(.n)')" "[1,3]" "records committed"
assert_eq "$(kdlq list --dlq "$D" --format ndjson | jq -r .line)" 2 "the dead letter's line"
assert_eq "$(sql "$S" "SELECT id FROM checkpoints WHERE completed_at IS NOT NULL")" 1 "checkpoints complete"
echo "transactions_bad_input: ok"
