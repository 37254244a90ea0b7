#include "kpipe/kinesis/shards.h"

#include <catch2/catch.hpp>

#include <string>

// Kinesis's answers (as the service and kinesis-mock give them: absent
// and null fields alike), sequence numbers beyond 64 bits compared by
// value, and the order of shards across a split and a merge.

namespace kpipe {

TEST_CASE("kinesis shards: a shard's id is its partition", "[kinesis][shards]") {
  CHECK(shard_partition("shardId-000000000007").value() == 7);
  CHECK(shard_partition("shardId-000000000000").value() == 0);
  CHECK(shard_partition("shardId-7").value() == 7);
  CHECK(shard_partition("shard-7").error().message ==
        "shard id 'shard-7' is not of the form shardId-NNNNNNNNNNNN");
  CHECK_FALSE(shard_partition("shardId-").ok());
  CHECK_FALSE(shard_partition("shardId-00000000000x").ok());
  CHECK_FALSE(shard_partition("shardId-9999999999999").ok());
}

TEST_CASE("kinesis shards: ListShards, open and closed, nulls as absent", "[kinesis][shards]") {
  auto page = parse_list_shards(R"({"Shards":[
    {"ShardId":"shardId-000000000000","ParentShardId":null,"AdjacentParentShardId":null,
     "HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"170141183460469231731687303715884105727"},
     "SequenceNumberRange":{"StartingSequenceNumber":"49656789012345678901234567890123456789012345678901234562",
                            "EndingSequenceNumber":"49656789012345678901234567890123456789012345678901234999"}},
    {"ShardId":"shardId-000000000002","ParentShardId":"shardId-000000000000",
     "SequenceNumberRange":{"StartingSequenceNumber":"49656789012345678901234567890123456789012345678901235000",
                            "EndingSequenceNumber":null}}],
    "NextToken":"page-2"})");
  REQUIRE(page.ok());
  CHECK(page->next_token == "page-2");
  REQUIRE(page->shards.size() == 2);
  CHECK(page->shards[0].partition == 0);
  CHECK(page->shards[0].parent.empty());
  CHECK(page->shards[0].closed());
  CHECK(page->shards[1].partition == 2);
  CHECK(page->shards[1].parent == "shardId-000000000000");
  CHECK_FALSE(page->shards[1].closed());
  CHECK(parse_list_shards(R"({"Shards":[],"NextToken":null})")->next_token.empty());
  CHECK(parse_list_shards("[]").error().message ==
        "kinesis ListShards: the answer is not a JSON object");
  CHECK(parse_list_shards(R"({"Shards":[{"ShardId":"x"}]})").error().message ==
        "kinesis ListShards: shard id 'x' is not of the form shardId-NNNNNNNNNNNN");
}

TEST_CASE("kinesis shards: GetRecords, its records, and a closed shard's last page",
          "[kinesis][shards]") {
  auto page = parse_get_records(R"({"Records":[
    {"SequenceNumber":"49656789012345678901234567890123456789012345678901234562",
     "ApproximateArrivalTimestamp":1.764412345123E9,"Data":"eyJhIjoxfQ==","PartitionKey":"u1"},
    {"SequenceNumber":"49656789012345678901234567890123456789012345678901234563",
     "ApproximateArrivalTimestamp":1764412345.5,"Data":"","PartitionKey":"u2","EncryptionType":null}],
    "NextShardIterator":"AAAA","MillisBehindLatest":1500})");
  REQUIRE(page.ok());
  REQUIRE(page->records.size() == 2);
  CHECK(page->records[0].data == R"({"a":1})");
  CHECK(page->records[0].partition_key == "u1");
  CHECK(page->records[0].arrival == 1764412345123);
  CHECK(page->records[1].data.empty());
  CHECK(page->records[1].arrival == 1764412345500);
  CHECK(page->next_iterator == std::optional<std::string>("AAAA"));
  CHECK(page->millis_behind == 1500);
  auto last = parse_get_records(R"({"Records":[],"NextShardIterator":null,"MillisBehindLatest":0,
    "ChildShards":[{"ShardId":"shardId-000000000002","ParentShards":["shardId-000000000000"]},
                   {"ShardId":"shardId-000000000003","ParentShards":["shardId-000000000000"]}]})");
  REQUIRE(last.ok());
  CHECK_FALSE(last->next_iterator);
  REQUIRE(last->child_shards.size() == 2);
  CHECK(last->child_shards[0].id == "shardId-000000000002");
  CHECK(last->child_shards[0].partition == 2);
  CHECK(last->child_shards[0].parent == "shardId-000000000000");
  CHECK(last->child_shards[1].id == "shardId-000000000003");
  auto merged = parse_get_records(R"({"Records":[],"NextShardIterator":null,"ChildShards":[
    {"ShardId":"shardId-000000000004","ParentShards":["shardId-000000000001","shardId-000000000003"]}]})");
  REQUIRE(merged.ok());
  CHECK(merged->child_shards[0].parent == "shardId-000000000001");
  CHECK(merged->child_shards[0].adjacent_parent == "shardId-000000000003");
  CHECK(parse_get_records(R"({"Records":[{"SequenceNumber":"1","Data":"!!"}]})").error().message ==
        "kinesis GetRecords: record 1: Data is not base64");
}

TEST_CASE("kinesis shards: children are read after their parents, across a split and a merge",
          "[kinesis][shards]") {
  ShardLineage lineage;
  auto shard = [](int n, int parent = -1, int adjacent = -1, bool closed = false) {
    Shard s;
    s.id = "shardId-00000000000" + std::to_string(n);
    s.partition = n;
    if (parent >= 0) s.parent = "shardId-00000000000" + std::to_string(parent);
    if (adjacent >= 0) s.adjacent_parent = "shardId-00000000000" + std::to_string(adjacent);
    if (closed) s.ending_sequence = "99";
    return s;
  };
  // 0 and 1 at the start; 0 split into 2 and 3; 3 and 1 merged into 4.
  lineage.add(shard(0, -1, -1, true));
  lineage.add(shard(1, -1, -1, true));
  lineage.add(shard(2, 0));
  lineage.add(shard(3, 0, -1, true));
  lineage.add(shard(4, 3, 1));
  using Ids = std::vector<std::string>;
  CHECK(lineage.readable() == Ids{"shardId-000000000000", "shardId-000000000001"});
  lineage.finish("shardId-000000000000");
  CHECK(lineage.readable() ==
        Ids{"shardId-000000000001", "shardId-000000000002", "shardId-000000000003"});
  lineage.finish("shardId-000000000003");
  // The merge waits for its other parent too.
  CHECK(lineage.readable() == Ids{"shardId-000000000001", "shardId-000000000002"});
  lineage.finish("shardId-000000000001");
  CHECK(lineage.readable() == Ids{"shardId-000000000002", "shardId-000000000004"});

  // Parents the stream trimmed away (no longer listed) hold nothing back.
  ShardLineage trimmed;
  trimmed.add(shard(4, 3, 1));
  CHECK(trimmed.readable() == Ids{"shardId-000000000004"});
}

}  // namespace kpipe
