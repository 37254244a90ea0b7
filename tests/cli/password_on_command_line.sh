#!/usr/bin/env bash
# A password in a program's arguments is every local user's (ps): one
# warning line, once per run however many are given, naming each without
# its value (kpipe(7), KAFKA OPTIONS and STORES). None when the password
# comes from a file (--config, -X KEY=@FILE) or the environment.
source "$(dirname "$0")/lib.sh"
cd "$WORK"

dead=$(bash -c 'source "$1/scripts/free-port.sh"; free_port' _ "$KPIPE_SOURCE_DIR")
nobody="127.0.0.1:$dead"
advice="a password on the command line, where every local user can read it (ps): keep it in the client file (--config), PGPASSWORD or ~/.pgpass, or a systemd credential (LoadCredential=), or read it from a file with -X KEY=@FILE"

# kupsert into an SQLite file takes -X (for its --dlq kafka:TOPIC) and
# needs no server: it ends at once on empty input.
upsert() { kupsert --db up.db --table t --key id "$@" </dev/null; }

# -X with a secret, given three times over two keys: one line, each key
# once, no value.
run 0 upsert -X sasl.password=hunter2 -X acks=all -X sasl.password=hunter3 \
  -X ssl.key.password=hunter4
expect_stderr "kupsert: warning: -X sasl.password and -X ssl.key.password put $advice
"
! grep -q hunter err || fail "the warning quotes a password: $(cat err)"
# "@@" is a literal '@': the password is still an argument.
run 0 upsert -X sasl.password=@@hunter2
expect_stderr "kupsert: warning: -X sasl.password puts $advice
"
# -q keeps standard error for errors.
run 0 upsert -q -X sasl.password=hunter2
expect_no_stderr

# Every kind at once, through a program with them all: one line.
run 1 kconsume -b "$nobody" -t events -X sasl.password=a --state "postgresql://u:pw@$nobody/x" \
  --dlq "postgresql:host=127.0.0.1 port=$dead password=pw" --registry "http://u:p@$nobody" \
  --registry-auth u:p --timeout 1s
[[ $(grep -c ': warning: ' err) == 1 ]] || fail "not one warning: $(cat err)"
[[ $(head -n 1 err) == "kconsume: warning: -X sasl.password, --state's PostgreSQL URI, --registry's user:password, --registry-auth and --dlq's PostgreSQL conninfo put $advice" ]] ||
  fail "not the warning expected: $(cat err)"
# A subcommand's store target, and a target's password as a URI parameter.
run 1 kdlq list --dlq "postgresql://u@$nobody/x?password=pw"
[[ $(head -n 1 err) == "kdlq: warning: --dlq's PostgreSQL URI puts $advice" ]] ||
  fail "kdlq list: not the warning expected: $(cat err)"
[[ $(grep -c ': warning: ' err) == 1 ]] || fail "kdlq list: not one warning: $(cat err)"

# From files and the environment: nothing to warn of.
printf 'hunter2\n' >password
printf 'sasl.password=hunter2\nsasl.jaas.config=x password="hunter2";\n' >client.properties
run 0 upsert -X sasl.password=@password
expect_no_stderr
run 0 upsert --config client.properties
expect_no_stderr
run 0 env KPIPE_CONFIG="$WORK/client.properties" kupsert --db up.db --table t --key id </dev/null
expect_no_stderr
run 1 env KPIPE_REGISTRY="http://u:p@$nobody" PGPASSWORD=pw kdlq list \
  --dlq "postgresql://u@$nobody/x"
! grep -q ': warning: ' err || fail "warned of a password from the environment: $(cat err)"
# No password at all: a target with a user only, a registry user only.
run 1 kdlq list --dlq "postgresql://u@$nobody/x"
! grep -q ': warning: ' err || fail "warned without a password: $(cat err)"

# -X KEY=@FILE reaches librdkafka: a value it refuses is the file's text.
printf 'bogus\n' >acks
run 2 kproduce -b "$nobody" -t events -X acks=@acks </dev/null
expect_stderr "kproduce: error: kafka property 'acks': Invalid value for configuration property \"request.required.acks\"
"
# A file that cannot be read: a usage error naming the key and the file,
# before any broker is asked.
run 2 kproduce -b "$nobody" -t events -X sasl.password=@missing </dev/null
expect_stderr "kproduce: error: -X sasl.password: cannot open 'missing': No such file or directory
"
chmod 000 password
if ! cat password >/dev/null 2>&1; then # root reads it all the same
  run 2 kproduce -b "$nobody" -t events -X sasl.password=@password </dev/null
  expect_stderr "kproduce: error: -X sasl.password: cannot open 'password': Permission denied
"
fi

echo "password_on_command_line: ok"
