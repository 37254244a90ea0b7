#!/usr/bin/env bash
# kconsume --efo CONSUMER refused before any broker or service is asked,
# in one line with status 2: with a Kafka topic (enhanced fan-out is a
# Kinesis stream's), and with a consumer name the service would refuse.
source "$(dirname "$0")/lib.sh"

run 2 kconsume -b 127.0.0.1:1 -t in --efo reports
expect_stdout ""
expect_stderr "kconsume: error: --efo: enhanced fan-out is a Kinesis stream's: it needs -t kinesis:STREAM, not a Kafka topic
"

run 2 kconsume -t kinesis:events --efo 'my reports' --region us-east-1 --endpoint http://127.0.0.1:1
expect_stdout ""
expect_stderr "kconsume: error: --efo 'my reports': a consumer's name is 1 to 128 letters, digits, '_', '.' and '-'
"
