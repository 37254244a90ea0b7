// Enhanced fan-out (kconsume --efo CONSUMER, issue 37): a consumer
// registered on the stream, and a subscription per shard (SubscribeToShard)
// on which the service pushes the shard's records as events, over HTTP/2,
// in AWS's event-stream framing (event_stream.h), each consumer with its
// own 2 MB/s a shard, where polling consumers share theirs. What is read
// and in which order is StreamReader's, as when polling: the fetcher below
// only fetches.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/kinesis/event_stream.h"
#include "kpipe/kinesis/http.h"
#include "kpipe/kinesis/kinesis_client.h"
#include "kpipe/kinesis/shards.h"
#include "kpipe/kinesis/stream_reader.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// The ARN of the consumer `name` of `stream`: the stream's ARN from
// DescribeStreamSummary, the consumer registered (RegisterStreamConsumer)
// when it does not exist, or the one of that name reused, then asked for
// (DescribeStreamConsumer, once a second) until it is ACTIVE, for up to
// `timeout`. It stays registered: it is the user's to deregister.
// `registered`, when given, says whether this call registered it.
Expected<std::string> register_consumer(KinesisClient& client, const std::string& stream,
                                        const std::string& name, Clock& clock, Millis timeout,
                                        bool* registered = nullptr);

// SubscribeToShard's request body.
std::string subscribe_body(std::string_view consumer_arn, std::string_view shard,
                           const ShardStart& start);

// The service allows one SubscribeToShard a second per consumer and shard.
constexpr Millis kSubscribeInterval = kSecond;
// How often the shards are listed while a subscription is at its tip, to
// learn that a shard was closed (a split, a merge) where the service does
// not say so in the subscription (kinesis-mock never sends ChildShards).
constexpr Millis kRelistInterval = 5 * kSecond;

// A subscription per readable shard, all on one transport (one HTTP/2
// connection). A subscription ends after 5 minutes, or when the service
// closes it: the shard is subscribed again after its last event's
// ContinuationSequenceNumber, once a second at most. A closed shard ends
// with an event naming its children (AWS), or, for a shard that was
// closed when it was subscribed, with an event at its tip with no record
// (kinesis-mock's only sign). Exceptions the service may clear
// (ResourceInUseException: a subscription of a run before still open;
// throttling; internal failures) and lost connections are retried with
// jittered backoff for up to `timeout`; any other is an error naming it.
class FanOutFetcher final : public ShardFetcher {
 public:
  FanOutFetcher(KinesisClient& client, std::string stream, std::string consumer_arn,
                std::unique_ptr<StreamingTransport> transport, Clock& clock, Millis timeout);
  ~FanOutFetcher() override;
  Status fetch(const std::vector<std::string>& readable, const ShardLineage& lineage,
               const StartOf& start_of, const Got& got) override;
  uint64_t calls() const override { return calls_; }
  uint64_t renewed() const override { return renewed_; }

 private:
  struct Subscription {
    bool open = false;
    StreamingTransport::Id id = 0;
    EventStreamDecoder decoder;
    long status = 0;
    std::string refusal;  // the body of an answer other than 200
    Millis subscribed = 0;
    Millis due = 0;  // when it may be subscribed (again)
    bool ever = false;
    std::string continuation;
    // Subscribed knowing the shard closed: an event at its tip with no
    // record ends it.
    bool closed_known = false;
    bool got_event = false;  // in this subscription
    int failures = 0;
    Millis failing_since = 0;
    std::string last_failure;
  };
  Status subscribe(const Shard& shard, Subscription& sub, const StartOf& start_of);
  void close(Subscription& sub);
  // A failure the service may clear: subscribed again after a backoff,
  // until `timeout` has passed since the first of a row.
  Status retry(const std::string& shard, Subscription& sub, std::string why);
  Status take(const std::string& shard, Subscription& sub, const StreamingTransport::Piece& piece,
              const ShardLineage& lineage, const Got& got);
  Status relist();
  std::vector<Shard> children_of(const std::string& id, const ShardLineage& lineage) const;

  KinesisClient& client_;
  std::string stream_;
  std::string consumer_arn_;
  std::unique_ptr<StreamingTransport> transport_;
  Clock& clock_;
  Millis timeout_;
  std::map<std::string, Subscription> subs_;
  std::map<StreamingTransport::Id, std::string> by_id_;
  std::set<std::string> closed_;         // shards known closed
  std::map<std::string, Shard> listed_;  // the last listing's
  Millis listed_at_ = 0;
  uint64_t calls_ = 0;
  uint64_t renewed_ = 0;
  uint64_t jitter_ = 0x2545f4914f6cdd1dULL;
};

}  // namespace kpipe
