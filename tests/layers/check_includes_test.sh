#!/usr/bin/env bash
# The include checker fails on each kind of broken rule, and passes a tree
# that keeps them: run on small trees made here.
set -euo pipefail
checker="$(cd "$(dirname "$0")" && pwd)/check_includes.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# tree NAME FILE LINE: a tree with one file holding one include line.
tree() {
  local dir="$work/$1" file=$2 line=$3
  mkdir -p "$dir/lib/kpipe" "$dir/tools" "$(dirname "$dir/$file")"
  printf '%s\n' "$line" >"$dir/$file"
  echo "$dir"
}
expect() {
  local want=$1 dir=$2 got=0
  KPIPE_SOURCE_DIR=$dir bash "$checker" >"$work/out" 2>&1 || got=$?
  if [[ $got != "$want" ]]; then
    echo "FAIL: check_includes on $(find "$dir" -type f | sed "s|$dir/||") exited $got, expected $want:"
    cat "$work/out"
    exit 1
  fi
}

expect 0 "$(tree ok lib/kpipe/stage/a.cpp '#include "kpipe/json.h"')"
expect 0 "$(tree ok2 lib/kpipe/programs/a.cpp '#include "kpipe/store/sqlite.h"')"
expect 1 "$(tree core_up lib/kpipe/json.cpp '#include "kpipe/stage/io.h"')"
expect 1 "$(tree stage_store lib/kpipe/stage/a.cpp '#include "kpipe/store/sqlite.h"')"
expect 1 "$(tree kafka_store lib/kpipe/kafka/a.cpp '#include "kpipe/store/state_store.h"')"
expect 1 "$(tree store_kafka lib/kpipe/store/a.cpp '#include "kpipe/kafka/client.h"')"
expect 1 "$(tree rdkafka lib/kpipe/programs/a.cpp '#include <librdkafka/rdkafka.h>')"
expect 1 "$(tree sqlite lib/kpipe/stage/a.cpp '#include <sqlite3.h>')"
expect 1 "$(tree tool_core tools/x/main.cpp '#include "kpipe/json.h"')"
expect 1 "$(tree new_folder lib/kpipe/misc/a.cpp '#include "kpipe/json.h"')"
# The codec interface includes no concrete codec; the factory may.
expect 1 "$(tree codec_impl lib/kpipe/schema/codec.cpp '#include "kpipe/schema/avro_codec.h"')"
expect 1 "$(tree codec_h_impl lib/kpipe/schema/codec.h '#include "kpipe/schema/protobuf_codec.h"')"
expect 0 "$(tree factory lib/kpipe/schema/codec_factory.cpp '#include "kpipe/schema/avro_codec.h"')"
expect 0 "$(tree codec_core lib/kpipe/schema/codec.cpp '#include "kpipe/schema/registry.h"')"
# The mock cluster is kbroker's alone among the programs.
expect 0 "$(tree mock_kbroker lib/kpipe/programs/kbroker.cpp '#include "kpipe/kafka/mock_cluster.h"')"
expect 1 "$(tree mock_program lib/kpipe/programs/kconsume.cpp '#include "kpipe/kafka/mock_cluster.h"')"
expect 1 "$(tree mock_client lib/kpipe/kafka/client.cpp '#include "kpipe/kafka/mock_cluster.h"')"
# The programs reach Kafka through the log (kafka_log.h), not its clients.
expect 0 "$(tree log_program lib/kpipe/programs/kconsume.cpp '#include "kpipe/kafka/kafka_log.h"')"
expect 1 "$(tree client_program lib/kpipe/programs/kconsume.cpp '#include "kpipe/kafka/client.h"')"
expect 1 "$(tree admin_program lib/kpipe/programs/klag.cpp '#include "kpipe/kafka/admin.h"')"
expect 0 "$(tree client_kafka lib/kpipe/kafka/kafka_log.cpp '#include "kpipe/kafka/client.h"')"
# Kinesis is a layer of its own beside Kafka: libcurl is its, neither
# layer uses the other, and the programs may use both.
expect 0 "$(tree curl_kinesis lib/kpipe/kinesis/http.cpp '#include <curl/curl.h>')"
expect 1 "$(tree curl_kafka lib/kpipe/kafka/a.cpp '#include <curl/curl.h>')"
expect 1 "$(tree kinesis_kafka lib/kpipe/kinesis/a.cpp '#include "kpipe/kafka/kafka_log.h"')"
expect 1 "$(tree kafka_kinesis lib/kpipe/kafka/a.cpp '#include "kpipe/kinesis/http.h"')"
# The programs reach Kinesis through kinesis_log.h, as Kafka through
# kafka_log.h: the client and its parts are the layer's own.
expect 0 "$(tree kinesis_program lib/kpipe/programs/a.cpp '#include "kpipe/kinesis/kinesis_log.h"')"
expect 1 "$(tree kinesis_client lib/kpipe/programs/a.cpp '#include "kpipe/kinesis/http.h"')"
expect 1 "$(tree kinesis_reader lib/kpipe/programs/a.cpp '#include "kpipe/kinesis/stream_reader.h"')"
echo "check_includes: each broken rule is caught"
