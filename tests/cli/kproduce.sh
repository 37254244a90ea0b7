#!/usr/bin/env bash
# Refused before any broker is asked: -X transactional.id (kproduce(1),
# TRANSACTIONS: the id goes with --transactional), which must not make the
# state store, and kconsume --isolation's values. (--transactional's other
# usage errors: tests/unit/programs/kproduce_test.cpp.) --explicit-hash-key with a
# Kafka topic.
source "$(dirname "$0")/lib.sh"

run 2 kproduce -b 127.0.0.1:1 -t out --transactional --state "$WORK/s.db" -X transactional.id=mine
expect_stdout ""
expect_stderr "kproduce: error: -X transactional.id: use --transactional (and --transactional-id ID)
"
[[ ! -e "$WORK/s.db" ]] || fail "a refused command made the state store"

run 2 kconsume -b 127.0.0.1:1 -t in --isolation read_comitted
expect_stderr "kconsume: error: unknown --isolation 'read_comitted', did you mean 'read_committed'?
"

# --explicit-hash-key places records in a Kinesis stream's shards: with a
# Kafka topic, a usage error in one line, before any broker is asked.
run 2 kproduce -b 127.0.0.1:1 -t out --explicit-hash-key .h
expect_stdout ""
expect_stderr "kproduce: error: --explicit-hash-key places records in a Kinesis stream's shards: a Kafka topic's records go by their key or -p (give -t kinesis:STREAM)
"
