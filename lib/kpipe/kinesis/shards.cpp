#include "kpipe/kinesis/shards.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>

#include "kpipe/json.h"

namespace kpipe {

namespace {

// A string member; "" when absent or null.
std::string text(simdjson::dom::element object, const char* key) {
  std::string_view v;
  if (object[key].get(v) != simdjson::SUCCESS) return {};
  return std::string(v);
}

Expected<simdjson::dom::element> parse(simdjson::dom::parser& parser, std::string_view json,
                                       std::string_view what) {
  simdjson::dom::element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return failure("kinesis {}: the answer is not a JSON object", what);
  return doc;
}

}  // namespace

Expected<int32_t> shard_partition(std::string_view id) {
  constexpr std::string_view kPrefix = "shardId-";
  if (!id.starts_with(kPrefix) || id.size() == kPrefix.size() || id.size() > kPrefix.size() + 12)
    return failure("shard id '{}' is not of the form shardId-NNNNNNNNNNNN", id);
  int64_t n = 0;
  for (char c : id.substr(kPrefix.size())) {
    if (c < '0' || c > '9')
      return failure("shard id '{}' is not of the form shardId-NNNNNNNNNNNN", id);
    n = n * 10 + (c - '0');
  }
  if (n > INT32_MAX) return failure("shard id '{}': its number is beyond a partition's", id);
  return static_cast<int32_t>(n);
}

Expected<ShardPage> parse_list_shards(std::string_view json) {
  simdjson::dom::parser parser;
  auto doc = parse(parser, json, "ListShards");
  if (!doc) return doc.take_error();
  ShardPage page;
  page.next_token = text(*doc, "NextToken");
  simdjson::dom::array shards;
  if ((*doc)["Shards"].get(shards) != simdjson::SUCCESS)
    return failure("kinesis ListShards: the answer has no Shards");
  for (simdjson::dom::element s : shards) {
    Shard shard;
    shard.id = text(s, "ShardId");
    auto partition = shard_partition(shard.id);
    if (!partition) return failure("kinesis ListShards: {}", partition.error().message);
    shard.partition = *partition;
    shard.parent = text(s, "ParentShardId");
    shard.adjacent_parent = text(s, "AdjacentParentShardId");
    simdjson::dom::element range;
    if (s["SequenceNumberRange"].get(range) == simdjson::SUCCESS && range.is_object()) {
      shard.starting_sequence = text(range, "StartingSequenceNumber");
      shard.ending_sequence = text(range, "EndingSequenceNumber");
    }
    page.shards.push_back(std::move(shard));
  }
  return page;
}

namespace {

// The records of a GetRecords answer or a SubscribeToShardEvent, Data
// decoded from base64; `what` names the operation in errors.
Status parse_records(simdjson::dom::element doc, std::string_view what,
                     std::vector<KinesisRecord>& out) {
  simdjson::dom::array records;
  if (doc["Records"].get(records) != simdjson::SUCCESS)
    return failure("kinesis {}: the answer has no Records", what);
  for (simdjson::dom::element r : records) {
    KinesisRecord record;
    record.sequence = text(r, "SequenceNumber");
    if (record.sequence.empty()) return failure("kinesis {}: a record has no SequenceNumber", what);
    record.partition_key = text(r, "PartitionKey");
    auto data = decode_base64(text(r, "Data"));
    if (!data) return failure("kinesis {}: record {}: Data is not base64", what, record.sequence);
    record.data = std::move(*data);
    // JSON 1.1 gives times as epoch seconds, with a fraction.
    double seconds = 0;
    if (r["ApproximateArrivalTimestamp"].get(seconds) == simdjson::SUCCESS)
      record.arrival = static_cast<Millis>(std::llround(seconds * 1000));
    out.push_back(std::move(record));
  }
  return {};
}

Status parse_children(simdjson::dom::element doc, std::string_view what, std::vector<Shard>& out) {
  simdjson::dom::array children;
  if (doc["ChildShards"].get(children) != simdjson::SUCCESS) return {};
  for (simdjson::dom::element c : children) {
    Shard child;
    child.id = text(c, "ShardId");
    auto partition = shard_partition(child.id);
    if (!partition) return failure("kinesis {}: {}", what, partition.error().message);
    child.partition = *partition;
    simdjson::dom::array parents;
    if (c["ParentShards"].get(parents) == simdjson::SUCCESS) {
      size_t i = 0;
      for (simdjson::dom::element p : parents) {
        std::string_view id;
        if (p.get(id) != simdjson::SUCCESS) continue;
        (i++ == 0 ? child.parent : child.adjacent_parent) = std::string(id);
      }
    }
    out.push_back(std::move(child));
  }
  return {};
}

}  // namespace

Expected<RecordsPage> parse_get_records(std::string_view json) {
  simdjson::dom::parser parser;
  auto doc = parse(parser, json, "GetRecords");
  if (!doc) return doc.take_error();
  RecordsPage page;
  std::string next = text(*doc, "NextShardIterator");
  if (!next.empty()) page.next_iterator = std::move(next);
  int64_t behind = 0;
  if ((*doc)["MillisBehindLatest"].get(behind) == simdjson::SUCCESS) page.millis_behind = behind;
  KPIPE_TRY(parse_records(*doc, "GetRecords", page.records));
  KPIPE_TRY(parse_children(*doc, "GetRecords", page.child_shards));
  return page;
}

Expected<ShardEvent> parse_shard_event(std::string_view json) {
  simdjson::dom::parser parser;
  auto doc = parse(parser, json, "SubscribeToShardEvent");
  if (!doc) return doc.take_error();
  ShardEvent event;
  event.continuation = text(*doc, "ContinuationSequenceNumber");
  int64_t behind = 0;
  if ((*doc)["MillisBehindLatest"].get(behind) == simdjson::SUCCESS) event.millis_behind = behind;
  KPIPE_TRY(parse_records(*doc, "SubscribeToShardEvent", event.records));
  KPIPE_TRY(parse_children(*doc, "SubscribeToShardEvent", event.child_shards));
  return event;
}

void ShardLineage::add(const Shard& shard) {
  shards_[shard.id] = shard;
}

void ShardLineage::finish(const std::string& id) {
  finished_.insert(id);
}

std::vector<std::string> ShardLineage::readable() const {
  auto parent_done = [this](const std::string& p) {
    // A parent no longer listed was trimmed away (or never seen): nothing
    // of it is left to read first.
    return p.empty() || shards_.count(p) == 0 || finished_.count(p) != 0;
  };
  std::vector<const Shard*> out;
  for (const auto& [id, s] : shards_)
    if (finished_.count(id) == 0 && parent_done(s.parent) && parent_done(s.adjacent_parent))
      out.push_back(&s);
  std::sort(out.begin(), out.end(),
            [](const Shard* a, const Shard* b) { return a->partition < b->partition; });
  std::vector<std::string> ids;
  for (const Shard* s : out) ids.push_back(s->id);
  return ids;
}

}  // namespace kpipe
