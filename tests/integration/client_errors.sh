#!/usr/bin/env bash
# What a client says when it cannot do what it was asked, the same on
# kbroker and on Kafka: a topic that does not exist is not created by a
# consumer asking for it; a name Kafka would refuse is refused before any
# broker is asked; a broker out of reach is named with librdkafka's reason
# (resolution, authentication), not "no answer"; and no message quotes a
# secret, however mistyped.
source "$(dirname "$0")/lib.sh"
start_broker events:2
events=$(topic events)
echo '{"n":1}' | kproduce -b "$BROKERS" -t "$events"

# --- A missing topic, asked for twice: kbroker must not create it ----------------------
typo=$(topic evnets)
for attempt in 1 2; do
  expect_exit 1 kconsume -b "$BROKERS" -t "$typo" -e
  assert_eq "$(cat "$WORK/err")" "kconsume: error: topic '$typo' does not exist" "attempt $attempt"
  expect_exit 1 kconsume -b "$BROKERS" -t "$typo" -g "$(group typo)" -e
  assert_eq "$(cat "$WORK/err")" "kconsume: error: topic '$typo' does not exist" "attempt $attempt, -g"
done

# --- Names Kafka refuses ------------------------------------------------------------------
long=$(head -c 250 /dev/zero | tr '\0' a)
for name in 'bad topic!' '..' "$long"; do
  case "$name" in
    ..) want="'..' is not a valid topic name" ;;
    "$long") want="topic name 'aaaaaaaaaaaaaaaaaaaa...' is 250 characters long; Kafka takes at most 249" ;;
    *) want="invalid topic name '$name': only ASCII letters, digits, '.', '_' and '-' are allowed" ;;
  esac
  # kproduce refuses it before any broker is asked: no broker is needed.
  expect_exit 2 kproduce -b 127.0.0.1:1 -t "$name" </dev/null
  assert_eq "$(cat "$WORK/err")" "kproduce: error: $want" "kproduce -t $name"
  expect_exit 2 kconsume -b "$BROKERS" -t "$name" -e
  assert_eq "$(cat "$WORK/err")" "kconsume: error: $want" "kconsume -t $name"
done
expect_exit 2 kbroker --topic 'bad topic!:3'
assert_eq "$(cat "$WORK/err")" "kbroker: error: --topic 'bad topic!:3': invalid topic name 'bad topic!': only \
ASCII letters, digits, '.', '_' and '-' are allowed"

# --- Why a broker cannot be reached ------------------------------------------------------
expect_exit 1 kproduce -b nosuchhost.invalid:9092 --timeout 2s -t "$events" </dev/null
assert_contains "$WORK/err" \
  "kproduce: error: cannot reach broker 'nosuchhost.invalid:9092': failed to resolve 'nosuchhost.invalid:9092': "
# SASL against a listener without it (kbroker has none; the real broker's
# listener is PLAINTEXT): librdkafka's reason, and never the password,
# not even in librdkafka's own log (-vv). The password is read from a file
# (-X KEY=@FILE), so no warning of one on the command line.
printf 'SECRET123\n' >"$WORK/password"
for program in kproduce kconsume; do
  args=()
  [[ $program == kconsume ]] && args=(-e)
  expect_exit 1 "$program" -b "$BROKERS" --timeout 3s -t "$events" "${args[@]}" -vv \
    -X security.protocol=SASL_PLAINTEXT -X sasl.mechanism=PLAIN -X sasl.username=alice -X "sasl.password=@$WORK/password" \
    </dev/null
  said=$(grep -v ': debug: ' "$WORK/err")
  [[ "$said" == "$program: error: cannot reach broker '$BROKERS': "*SASL* ]] || fail "$program: no SASL reason: $said"
  ! grep -q 'SECRET123' "$WORK/err" || fail "$program: the password is in its messages: $(grep SECRET123 "$WORK/err")"
done

# --- Secrets, however mistyped ---------------------------------------------------------
for program in kproduce kconsume; do
  expect_exit 2 "$program" -b "$BROKERS" -t "$events" -X sasl.password:SECRET123
  assert_eq "$(cat "$WORK/err")" "$program: error: -X 'sasl.password:***': expected key=value"
  expect_exit 2 "$program" -b "$BROKERS" -t "$events" -X 'ssl.key.password SECRET123'
  assert_eq "$(cat "$WORK/err")" "$program: error: -X 'ssl.key.password ***': expected key=value"
done
# In a --config file, a password run into its key is an unknown property:
# named without what follows "password".
printf 'sasl.mechanism=PLAIN\nsasl.passwordSECRET123\n' >"$WORK/client.properties"
expect_exit 2 kproduce -b "$BROKERS" -t "$events" --config "$WORK/client.properties"
assert_contains "$WORK/err" "kproduce: error: kafka property 'sasl.password***': "
! grep -q 'SECRET123' "$WORK/err" || fail "the password is in the message: $(cat "$WORK/err")"
