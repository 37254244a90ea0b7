#!/usr/bin/env bash
# A password written in a PostgreSQL target or a registry URL is never
# printed (kpipe(7), STORES), not even inside what libpq or libcurl say
# about a target they cannot parse: libpq quotes the URI whole, or the
# token it stumbled on, which may be the password or a piece of it. Every
# program that takes a PostgreSQL target, through every option that takes
# one. No server is needed: libpq refuses these before connecting.
source "$(dirname "$0")/lib.sh"
cd "$WORK"

# A port nothing listens on, for the brokers and registries of programs
# that look at the store first.
dead=$(bash -c 'source "$1/scripts/free-port.sh"; free_port' _ "$KPIPE_SOURCE_DIR")
nobody="127.0.0.1:$dead"

# klag opens its --state after the broker answers: kbroker, which prints
# its bootstrap list as its first line (the synchronisation, no sleep).
mkfifo kbroker.out
kbroker >kbroker.out 2>kbroker.err &
broker_pid=$!
trap 'status=$?; kill "$broker_pid" 2>/dev/null; [[ $status -eq 0 ]] && rm -rf "$WORK"; exit $status' EXIT
exec 9<kbroker.out
read -r -t 30 brokers <&9 || fail "kbroker did not start: $(cat kbroker.err)"
cat <&9 >/dev/null &
exec 9<&-

printf '{"id":1,"t":1}\n' >in.ndjson

# Each secret is SECRET plus a letter: the letter tells which target leaked.
targets=(
  # A URI libpq cannot parse: it quotes it whole.
  'postgresql://u:SECRETa@[bad/p'
  # A bad percent-escape in the password: libpq quotes the token.
  'postgresql://u:SECRETb%zz@h/db'
  'postgres://u@h/db?password=SECRETc%zz'
  # An '&' in the password: libpq quotes what follows as a parameter.
  'postgresql://u@h/db?password=SECRETd&SECRETe'
  # A '/' in the password: libpq reads what precedes it as host:port.
  'postgresql://u:pw/SECRETf@h/db'
  # A conninfo: a blank in the password, the rest read as a keyword.
  'postgresql:host=h password=pw SECRETg'
  'postgresql:host=h password=pw SECRETh=1 dbname=x'
  # A quote left open.
  "postgresql:host=h password='pw SECRETi"
)

# check PROGRAM ARGS...: exits 1 with one line of error, and no SECRET
# anywhere. The password is on the command line: one warning says so first.
check() {
  run 1 "$@" <in.ndjson
  ! grep -q SECRET out err || fail "'$*' printed the password: $(cat out err)"
  [[ $(wc -l <err) == 2 ]] || fail "'$*': not a warning and one line of error: $(cat err)"
  grep -q "^$1: warning: .* a password on the command line, " err ||
    fail "'$*': no warning of the password in its arguments: $(cat err)"
  grep -q "^$1: error: " err || fail "'$*': not an error: $(cat err)"
}

for t in "${targets[@]}"; do
  check kupsert --db "$t" --table t --key id
  check kupsert --db up.db --table t --key id --state "$t"
  check kupsert --db up.db --table t --key id --dlq "$t"
  check kcheckpoint show --state "$t"
  check kcheckpoint history --state "$t"
  check kcheckpoint history --state "$t" --plot -
  check kcheckpoint verify --state "$t"
  check kdlq list --dlq "$t"
  check kdlq stats --dlq "$t"
  check kdlq guard --require .id --dlq "$t"
  check kconsume -b "$nobody" -t events -g g --state "$t"
  check kconsume -b "$nobody" -t events -g g --dlq "$t"
  check kdedup --key .id --state "$t"
  check kdedup --key .id --dlq "$t"
  check kwindow --time .t --tumble 1m --state "$t"
  check kwindow --time .t --tumble 1m --dlq "$t"
  check kjoin --table "$t#t" --table-key id --key .id --as .x
  check kjoin --table in.ndjson --table-key .id --key .id --as .x --state "$t"
  check kjoin --table in.ndjson --table-key .id --key .id --as .x --dlq "$t"
  check klag -b "$brokers" --state "$t"
  check kproduce -b "$nobody" -t events --transactional --transactional-id p --state "$t"
  check kproduce -b "$nobody" -t events --dlq "$t"
done

# What the message keeps: the target without its password, and libpq's
# reason with the piece it quotes hidden.
run 1 kupsert --db 'postgresql://u:SECRETa@[bad/p' --table t --key id </dev/null
expect_stderr 'kupsert: warning: --db'\''s PostgreSQL URI puts a password on the command line, where every local user can read it (ps): keep it in the client file (--config), PGPASSWORD or ~/.pgpass, or a systemd credential (LoadCredential=), or read it from a file with -X KEY=@FILE
kupsert: error: postgresql://u@[bad/p: cannot connect: end of string reached when looking for matching "]" in IPv6 host address in URI: "postgresql://u@[bad/p"
'
run 1 kcheckpoint show --state 'postgresql://u:SECRETb%zz@h/db'
expect_stderr 'kcheckpoint: warning: --state'\''s PostgreSQL URI puts a password on the command line, where every local user can read it (ps): keep it in the client file (--config), PGPASSWORD or ~/.pgpass, or a systemd credential (LoadCredential=), or read it from a file with -X KEY=@FILE
kcheckpoint: error: postgresql://u@h/db: cannot connect: invalid percent-encoded token: "***"
'
run 1 kdlq list --dlq 'postgresql:host=h password=pw SECRETg'
expect_stderr 'kdlq: warning: --dlq'\''s PostgreSQL conninfo puts a password on the command line, where every local user can read it (ps): keep it in the client file (--config), PGPASSWORD or ~/.pgpass, or a systemd credential (LoadCredential=), or read it from a file with -X KEY=@FILE
kdlq: error: postgresql:(a conninfo libpq cannot read): cannot connect: missing "=" after "***" in connection info string
'
# A usage error that names the table names it without the password.
run 2 kjoin --table 'postgresql://u:SECRETa@h/db#t' --key .id --as .x
expect_stderr "kjoin: warning: --table's PostgreSQL URI puts a password on the command line, where every local user can read it (ps): keep it in the client file (--config), PGPASSWORD or ~/.pgpass, or a systemd credential (LoadCredential=), or read it from a file with -X KEY=@FILE
kjoin: error: --table postgresql://u@h/db#t needs --table-key COLUMN
"

# A registry URL: a password holding a '/' (libcurl was given the URL
# whole), one libcurl cannot parse, and one it can.
for url in "http://u:pw/SECRETj@$nobody" "http://u:SECRETk@[bad" "http://u:SECRETl@$nobody/"; do
  check kproduce -b "$nobody" -t events --value-format avro --subject s-value \
    --registry "$url" --timeout 1s
done
run 1 kproduce -b "$nobody" -t events --value-format avro --subject s-value --timeout 1s \
  --registry "http://u:pw/SECRETj@[bad"
grep -q "^kproduce: error: --value-format avro: registry http://\[bad/subjects/s-value/versions/latest: " err ||
  fail "the registry's URL is not named without its password: $(cat err)"

echo "passwords_never_printed: ok"
