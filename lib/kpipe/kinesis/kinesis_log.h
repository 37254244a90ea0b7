// Amazon Kinesis Data Streams as a log (kpipe(7), LOGS): the one door the
// programs open for `-t kinesis:NAME`, as KafkaLog is for Kafka. A stream
// is a topic, its shards partitions (by the number a shard's id ends
// with), a record's position its sequence number, kept as text. Reading
// follows the shards' lineage (a child after its parents, StreamReader);
// writing goes in PutRecords batches (KinesisWriter), a record placed by
// its partition key or by an explicit hash key (OpenedWriter::hashing).
// Kinesis has no consumer groups and no transactions: OpenedReader and
// OpenedWriter carry none, and a program that needs one says so.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kpipe/dead_letters.h"
#include "kpipe/dlq_entry.h"
#include "kpipe/dlq_log.h"
#include "kpipe/kinesis/aws_config.h"
#include "kpipe/log.h"
#include "kpipe/report.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// `-t kinesis:NAME` or `-t kinesis:arn:aws:kinesis:REGION:ACCOUNT:stream/NAME`.
struct KinesisStreamName {
  std::string name;
  std::string region;  // from an ARN; empty otherwise
};
inline constexpr std::string_view kKinesisPrefix = "kinesis:";
bool is_kinesis_target(std::string_view target);
// The stream `target` names (after "kinesis:"); a usage error for a name
// Kinesis would refuse or an ARN that is not a Kinesis stream's.
Expected<KinesisStreamName> parse_kinesis_target(std::string_view target);

// kconsume --efo CONSUMER: a consumer's name as the service takes it, 1
// to 128 letters, digits, '_', '.' and '-'; a usage error otherwise.
Status check_consumer_name(std::string_view name);

// A record's ExplicitHashKey (kproduce --explicit-hash-key, HashPlacement
// in log.h): `digits`, a decimal integer from 0 to 2^128-1, as the service
// takes it (no leading zeros); a data_error naming it otherwise.
Expected<std::string> parse_explicit_hash_key(std::string_view digits);

// What the command line says of Kinesis (--region, --endpoint), and the
// environment AWS's conventions read (the cli layer fills it in).
struct KinesisOptions {
  std::string region;
  std::string endpoint;
  AwsEnvironment env;
};

// How much earlier than this machine's clock says a replay's mark is
// set: the service stamps arrivals by its own clock, which may be behind.
inline constexpr Millis kReplayMarkSkew = kSecond;

class KinesisLogImpl;
class HttpTransport;
struct AwsCredentials;
using CredentialSource = std::function<Expected<AwsCredentials>()>;

class KinesisLog {
 public:
  // Resolves the region, the endpoint and the credentials by AWS's
  // conventions (aws_config.h, aws_credentials.h) for the stream `target`
  // names; asks nothing of the stream yet. Each call is retried until
  // `timeout` (--timeout) has passed.
  static Expected<KinesisLog> open(const KinesisOptions& options, std::string_view target,
                                   std::string_view timeout, Reporter& reporter, Clock& clock);
  KinesisLog(KinesisLog&&) noexcept;
  KinesisLog& operator=(KinesisLog&&) noexcept;
  ~KinesisLog();

  const std::string& stream() const;
  const AwsSettings& settings() const;
  // A reader of the stream's shards. It reads one stream: assign() refuses
  // partitions of another name. With `efo_consumer` (kconsume --efo), the
  // records come by enhanced fan-out (fan_out.h) to the consumer of that
  // name, registered on the stream unless it is already, and left
  // registered (the user's to deregister: AWS bills it by the hour).
  Expected<OpenedReader> reader(const std::string& efo_consumer = {}) const;
  // A writer to the stream.
  Expected<OpenedWriter> writer() const;

  // What klag reads of a shard (klag(1), Kinesis).
  struct ShardNext {
    int32_t partition = 0;
    // The arrival time of the first record after the shard's position;
    // none when there is none yet.
    std::optional<Millis> arrival;
  };
  // Each shard the stream lists, with the first record after `from`'s
  // position for it (a record or two read per shard, never the backlog).
  // A shard not in `from` is read from its start, but for a closed one
  // with a child in `from`, which is left out: its reader has gone past
  // it, since a child is read only after its parents (StreamReader).
  Expected<std::vector<ShardNext>> next_arrivals(const std::map<int32_t, Position>& from) const;

  // The stream as kdlq replay's target (--to kinesis:STREAM, kdlq(1)): an
  // entry goes as the record it came from (replay_record), its key the
  // partition key (the entry's replay id when it has none), its headers
  // and timestamp dropped, which a Kinesis record cannot hold. Its records
  // carry no replay id: a batch's mark is the time just before it is sent
  // (kReplayMarkSkew earlier), and an in-doubt entry counts as delivered
  // when a record with exactly its partition key and bytes arrived since.
  // An error if the stream does not exist.
  Expected<std::unique_ptr<ReplayTarget>> replay_target() const;

  // The stream as a dead-letter store (--dlq kinesis:STREAM, kpipe(7),
  // BAD INPUT): a dead letter is one record whose data is
  // dead_letter_json(), its partition key the source's "TOPIC/PARTITION"
  // when the line was an envelope (a source partition's dead letters stay
  // in order in one shard), else the stage. One too large for a record is
  // the store failing, not bad input. An error if the stream does not
  // exist.
  Expected<std::unique_ptr<DeadLetterSink>> dead_letter_sink() const;
  // The stream as kdlq reads and replays it (kdlq(1)): every shard from
  // its start to its tip, a child after its parents; an entry's position
  // is its shard's number and sequence number. `positions` keeps the
  // replay position (a table of --state, made by the caller): without it,
  // no entry shows as replayed, and there is no ledger to replay with. A
  // stream deletes nothing: purge is refused. An error if the stream does
  // not exist.
  Expected<std::unique_ptr<DeadLetters>> dead_letters(
      std::unique_ptr<ReplayPositions> positions) const;

 private:
  friend KinesisLog make_kinesis_log(AwsSettings, std::string, std::shared_ptr<HttpTransport>,
                                     CredentialSource, Clock&, Millis);
  explicit KinesisLog(std::shared_ptr<KinesisLogImpl> impl);
  std::shared_ptr<KinesisLogImpl> impl_;
};

}  // namespace kpipe
