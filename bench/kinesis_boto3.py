#!/usr/bin/env python3
"""boto3's side of bench/kinesis.sh: the same work as kproduce and kconsume.

    kinesis_boto3.py produce STREAM FILE.ndjson [KEY_FIELD]
    kinesis_boto3.py consume STREAM > out.ndjson

produce: each line of FILE is one record, its partition key the line's
KEY_FIELD (default user_id), sent with put_records in batches of 500 (the
API's maximum); records the service failed or throttled are sent again.

consume: list_shards, a TRIM_HORIZON iterator for every shard, then
get_records (10,000 at most a call) round the shards, at most 5 calls a
second per shard (the service's limit), until every shard is at its tip
(MillisBehindLatest 0 and no records) or closed; each record's data is
written as one line to standard output.

One client for the whole run; endpoint and region from --endpoint and
--region, else AWS_ENDPOINT_URL_KINESIS and AWS_REGION as boto3 finds them.
"""

import argparse
import json
import sys
import time

import boto3
import botocore.config

BATCH = 500
CALLS_PER_SECOND = 5


def client(args):
    config = botocore.config.Config(retries={"mode": "standard", "max_attempts": 10})
    return boto3.client("kinesis", endpoint_url=args.endpoint, region_name=args.region, config=config)


def produce(args):
    kinesis = client(args)
    sent = 0

    def put(records):
        nonlocal sent
        while records:
            answer = kinesis.put_records(StreamName=args.stream, Records=records)
            if not answer.get("FailedRecordCount"):
                sent += len(records)
                return
            # Only the failed ones again, in their order.
            failed = [r for r, result in zip(records, answer["Records"]) if "ErrorCode" in result]
            sent += len(records) - len(failed)
            records = failed
            time.sleep(0.1)

    batch = []
    with open(args.file, "rb") as f:
        for line in f:
            line = line.rstrip(b"\n")
            if not line:
                continue
            key = json.loads(line)[args.key]
            batch.append({"Data": line, "PartitionKey": str(key)})
            if len(batch) == BATCH:
                put(batch)
                batch = []
    if batch:
        put(batch)
    print(f"kinesis_boto3: {sent} records put", file=sys.stderr)


def consume(args):
    kinesis = client(args)
    shards = []
    for page in kinesis.get_paginator("list_shards").paginate(StreamName=args.stream):
        shards.extend(s["ShardId"] for s in page["Shards"])
    iterators = {
        shard: kinesis.get_shard_iterator(
            StreamName=args.stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        for shard in shards
    }
    due = dict.fromkeys(shards, 0.0)
    out = sys.stdout.buffer
    count = 0
    while iterators:
        now = time.monotonic()
        ready = [s for s in iterators if due[s] <= now]
        if not ready:
            time.sleep(min(due[s] for s in iterators) - now)
            continue
        for shard in ready:
            due[shard] = time.monotonic() + 1 / CALLS_PER_SECOND
            answer = kinesis.get_records(ShardIterator=iterators[shard], Limit=10000)
            records = answer["Records"]
            if records:
                out.write(b"".join(r["Data"] + b"\n" for r in records))
                count += len(records)
            following = answer.get("NextShardIterator")
            if following is None or (not records and answer.get("MillisBehindLatest") == 0):
                del iterators[shard]
            else:
                iterators[shard] = following
    out.flush()
    print(f"kinesis_boto3: {count} records read from {len(shards)} shards", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint")
    parser.add_argument("--region")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("stream")
    p.add_argument("file")
    p.add_argument("key", nargs="?", default="user_id")
    c = sub.add_parser("consume")
    c.add_argument("stream")
    args = parser.parse_args()
    if args.command == "produce":
        produce(args)
    else:
        consume(args)


if __name__ == "__main__":
    main()
