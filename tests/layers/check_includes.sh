#!/usr/bin/env bash
# The layering rules of docs/architecture.md, checked on every include line
# of lib/ and tools/: a header of a layer a file may not use, or a client
# library included outside its one layer, fails the test with the line.
set -euo pipefail
root=${KPIPE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"

# The layer of a path under lib/kpipe/ or tools/.
layer_of() {
  case $1 in
    lib/kpipe/stage/*) echo stage ;;
    lib/kpipe/kafka/*) echo kafka ;;
    lib/kpipe/kinesis/*) echo kinesis ;;
    lib/kpipe/store/*) echo store ;;
    lib/kpipe/schema/*) echo schema ;;
    lib/kpipe/programs/*) echo programs ;;
    lib/kpipe/cli/*) echo cli ;;
    lib/kpipe/*/*) echo unknown ;;
    lib/kpipe/*) echo core ;;
    tools/*) echo tools ;;
  esac
}

# The layers each layer may include from (itself included).
allowed() {
  case $1 in
    core) echo "core" ;;
    stage) echo "core stage" ;;
    kafka) echo "core kafka" ;;
    kinesis) echo "core kinesis" ;;
    store) echo "core store" ;;
    schema) echo "core schema" ;;
    programs) echo "core stage kafka kinesis store schema programs" ;;
    cli) echo "core stage kafka kinesis cli" ;;
    tools) echo "cli programs" ;;
  esac
}

# System headers that only one layer may include.
client_layer() {
  case $1 in
    librdkafka/*) echo kafka ;;
    sqlite3.h | libpq-fe.h | libpq/*) echo store ;;
    CLI/*) echo "cli tools" ;;
    systemd/*) echo cli ;;
    curl/*) echo "schema kinesis" ;;
    avro.h | avro/* | google/protobuf/*) echo schema ;;
  esac
}

# Within a layer, an interface that may include none of its
# implementations (a glob of kpipe/ paths): the implementations include
# it, and picking one is a factory's job (schema/codec_factory).
implementations_of() {
  case $1 in
    lib/kpipe/schema/codec.h | lib/kpipe/schema/codec.cpp) echo "schema/*_codec.h" ;;
  esac
}

# A header that only some files may include (globs of paths): the mock
# cluster is kbroker's, and no production program may start one; the
# Kafka clients are kafka/'s own, and the programs reach Kafka through
# kafka_log.h, as the log interface (log.h) of any backend.
includers_of() {
  case $1 in
    kafka/mock_cluster.h) echo "lib/kpipe/kafka/mock_cluster.* lib/kpipe/programs/kbroker.*" ;;
    kafka/client.h | kafka/admin.h | kafka/dlq.h | kafka/internal.h) echo "lib/kpipe/kafka/*" ;;
    kinesis/http.h | kinesis/kinesis_client.h | kinesis/stream_reader.h | kinesis/put_records.h | \
      kinesis/shards.h | kinesis/aws_credentials.h | kinesis/kinesis_log_internal.h)
      echo "lib/kpipe/kinesis/*" ;;
  esac
}

bad=0
while IFS= read -r file; do
  from=$(layer_of "$file")
  if [[ $from == unknown ]]; then
    echo "$file: a folder of lib/kpipe that is not a layer (see docs/architecture.md)"
    bad=1
    continue
  fi
  ok=" $(allowed "$from") "
  impl=$(implementations_of "$file")
  while IFS=: read -r line text; do
    if [[ $text =~ ^#include\ \"kpipe/([^\"]+)\" ]]; then
      target=$(layer_of "lib/kpipe/${BASH_REMATCH[1]}")
      if [[ $ok != *" $target "* ]]; then
        echo "$file:$line: $from may not include $target: $text"
        bad=1
      fi
      # shellcheck disable=SC2053 # $impl is a glob
      if [[ -n $impl && ${BASH_REMATCH[1]} == $impl ]]; then
        echo "$file:$line: an interface may not include its implementations ($impl): $text"
        bad=1
      fi
      only=$(includers_of "${BASH_REMATCH[1]}")
      if [[ -n $only ]]; then
        mine=0
        for glob in $only; do
          # shellcheck disable=SC2053 # $glob is a glob
          [[ $file == $glob ]] && mine=1
        done
        if [[ $mine == 0 ]]; then
          echo "$file:$line: only $only may include kpipe/${BASH_REMATCH[1]}: $text"
          bad=1
        fi
      fi
    elif [[ $text =~ ^#include\ \<([^\>]+)\> ]]; then
      only=$(client_layer "${BASH_REMATCH[1]}")
      if [[ -n $only && " $only " != *" $from "* ]]; then
        echo "$file:$line: only $only may include <${BASH_REMATCH[1]}>: $text"
        bad=1
      fi
    fi
  done < <(grep -n '^#include' "$file" || true)
done < <(find lib/kpipe tools -name '*.h' -o -name '*.cpp' | sort)

if [[ $bad -ne 0 ]]; then
  echo "layers: include rules broken (docs/architecture.md says where each piece goes)"
  exit 1
fi
echo "layers: every include follows the rules"
