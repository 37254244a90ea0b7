// A stream's shards as Kinesis lists them, what GetRecords answers, and
// the order shards are read in: a child only once every parent has been
// read to its end, so that each partition key's records stay in order
// across a split or a merge (as the KCL and Flink's connector read them).
// Pure: the answers are parsed from text, and the lineage is a small
// engine over shard ids.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

struct Shard {
  std::string id;               // "shardId-000000000007"
  int32_t partition = -1;       // 7: the number its id ends with (kpipe(7), LOGS)
  std::string parent;           // "" when none
  std::string adjacent_parent;  // the second parent of a merge; "" when none
  std::string starting_sequence;
  std::string ending_sequence;  // "" while the shard is open
  bool closed() const { return !ending_sequence.empty(); }
};

// "shardId-000000000007" is partition 7; an id of another form is an error.
Expected<int32_t> shard_partition(std::string_view id);

struct ShardPage {
  std::vector<Shard> shards;
  std::string next_token;  // "" on the last page
};
// ListShards' answer. Fields the service leaves out and fields it gives as
// null (kinesis-mock) are alike absent.
Expected<ShardPage> parse_list_shards(std::string_view json);

struct KinesisRecord {
  std::string sequence;  // decimal digits, up to 56 of them
  std::string partition_key;
  std::string data;  // decoded from base64
  Millis arrival = 0;
};

struct RecordsPage {
  std::vector<KinesisRecord> records;
  // Where to go on; nullopt once the shard is closed and read to its end.
  std::optional<std::string> next_iterator;
  int64_t millis_behind = 0;  // MillisBehindLatest: 0 at the shard's tip
  // Given with a closed shard's last page: the shards that follow it,
  // with their parents.
  std::vector<Shard> child_shards;
};
Expected<RecordsPage> parse_get_records(std::string_view json);

// A SubscribeToShardEvent's payload (enhanced fan-out, fan_out.h): its
// records as GetRecords gives them, and where a subscription goes on.
struct ShardEvent {
  std::vector<KinesisRecord> records;
  // The sequence number to subscribe after next; "" in a closed shard's
  // last event.
  std::string continuation;
  int64_t millis_behind = 0;
  // Given with a closed shard's last event, as with its last page.
  std::vector<Shard> child_shards;
};
Expected<ShardEvent> parse_shard_event(std::string_view json);

// Which shards may be read now. A shard whose parents are not (or no
// longer) listed is a root: the stream trimmed them away, or it began with
// it. A shard is finished when read to its end (its last page had no next
// iterator), or when a checkpoint says so.
class ShardLineage {
 public:
  void add(const Shard& shard);
  void finish(const std::string& id);
  bool finished(const std::string& id) const { return finished_.count(id) != 0; }
  // The shards not finished whose parents all are, in partition order.
  std::vector<std::string> readable() const;
  const std::map<std::string, Shard>& shards() const { return shards_; }

 private:
  std::map<std::string, Shard> shards_;
  std::set<std::string> finished_;
};

}  // namespace kpipe
