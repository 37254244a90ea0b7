#include "kpipe/kinesis/fan_out.h"

#include <simdjson.h>

#include <algorithm>
#include <limits>

#include "kpipe/json.h"

namespace kpipe {

namespace {

// The SDKs' backoff, as KinesisClient's: 100 ms doubled each attempt, up
// to 5 s, a random part of it.
constexpr Millis kBackoffBase = 100;
constexpr Millis kBackoffCap = 5 * kSecond;
// The longest wait on the connection in one fetch: the caller's loop
// (signals, --until, checkpoints) comes round at least this often.
constexpr Millis kLongestWait = 200;
// Consumers are asked for once a second while they are being made.
constexpr Millis kConsumerPoll = kSecond;

// Exceptions a subscription may meet that pass on their own: another
// subscription to the shard still open (a run before, or one ended less
// than 5 seconds ago), throttling, the service's own failures.
bool clears_by_itself(std::string_view type) {
  return type == "ResourceInUseException" || type == "LimitExceededException" ||
         type == "ThrottlingException" || type == "ProvisionedThroughputExceededException" ||
         type == "InternalFailure" || type == "InternalFailureException" ||
         type == "ServiceUnavailable" || type == "KMSThrottlingException";
}

std::string text_of(simdjson::dom::element e, const char* a, const char* b) {
  std::string_view v;
  if (e[a][b].get(v) != simdjson::SUCCESS) return {};
  return std::string(v);
}

std::string arn_and_name(std::string_view arn, std::string_view name) {
  std::string body = R"({"StreamARN":)";
  append_json_string(body, arn);
  body += R"(,"ConsumerName":)";
  append_json_string(body, name);
  return body + "}";
}

}  // namespace

Expected<std::string> register_consumer(KinesisClient& client, const std::string& stream,
                                        const std::string& name, Clock& clock, Millis timeout,
                                        bool* registered) {
  if (registered != nullptr) *registered = false;
  Millis deadline = clock.steady() + timeout;
  std::string body = R"({"StreamName":)";
  append_json_string(body, stream);
  body += "}";
  auto summary = client.call("DescribeStreamSummary", body);
  if (!summary) {
    if (client.last_error().type == "ResourceNotFoundException")
      return failure("kinesis stream '{}' does not exist (region {}, endpoint {})", stream,
                     client.settings().region, client.settings().endpoint);
    return summary.take_error();
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string arn;
  if (parser.parse(*summary).get(doc) == simdjson::SUCCESS)
    arn = text_of(doc, "StreamDescriptionSummary", "StreamARN");
  if (arn.empty())
    return failure("kinesis DescribeStreamSummary: no StreamARN for stream '{}'", stream);
  std::string status;
  for (;;) {
    auto described = client.call("DescribeStreamConsumer", arn_and_name(arn, name));
    if (!described) {
      if (client.last_error().type != "ResourceNotFoundException") return described.take_error();
      // None of that name: registered. One registered meanwhile (by
      // another kconsume) is as good.
      auto answer = client.call("RegisterStreamConsumer", arn_and_name(arn, name));
      if (!answer && client.last_error().type != "ResourceInUseException")
        return answer.take_error();
      if (answer && registered != nullptr) *registered = true;
      status = "being registered";
    } else {
      std::string consumer_arn;
      if (parser.parse(*described).get(doc) == simdjson::SUCCESS) {
        consumer_arn = text_of(doc, "ConsumerDescription", "ConsumerARN");
        status = text_of(doc, "ConsumerDescription", "ConsumerStatus");
      }
      if (consumer_arn.empty())
        return failure("kinesis DescribeStreamConsumer: no ConsumerARN for consumer '{}'", name);
      if (status == "ACTIVE") return consumer_arn;
    }
    // CREATING (or DELETING, after which it is registered anew).
    if (clock.steady() + kConsumerPoll > deadline)
      return failure("kinesis: consumer '{}' of stream '{}' is not ACTIVE within {} (it is {})",
                     name, stream, format_duration(timeout), status);
    clock.sleep_for(kConsumerPoll);
  }
}

std::string subscribe_body(std::string_view consumer_arn, std::string_view shard,
                           const ShardStart& start) {
  std::string out = R"({"ConsumerARN":)";
  append_json_string(out, consumer_arn);
  out += R"(,"ShardId":)";
  append_json_string(out, shard);
  switch (start.kind) {
    case ShardStart::Kind::kTrimHorizon:
      out += R"(,"StartingPosition":{"Type":"TRIM_HORIZON"}})";
      break;
    case ShardStart::Kind::kLatest:
      out += R"(,"StartingPosition":{"Type":"LATEST"}})";
      break;
    case ShardStart::Kind::kAtTimestamp:
      out += fmt::format(R"(,"StartingPosition":{{"Type":"AT_TIMESTAMP","Timestamp":{}.{:03}}}}})",
                         floor_div(start.time, 1000), floor_mod(start.time, 1000));
      break;
    case ShardStart::Kind::kAfterSequence:
      out += R"(,"StartingPosition":{"Type":"AFTER_SEQUENCE_NUMBER","SequenceNumber":)";
      append_json_string(out, start.sequence);
      out += "}}";
      break;
  }
  return out;
}

FanOutFetcher::FanOutFetcher(KinesisClient& client, std::string stream, std::string consumer_arn,
                             std::unique_ptr<StreamingTransport> transport, Clock& clock,
                             Millis timeout)
    : client_(client),
      stream_(std::move(stream)),
      consumer_arn_(std::move(consumer_arn)),
      transport_(std::move(transport)),
      clock_(clock),
      timeout_(timeout) {}

FanOutFetcher::~FanOutFetcher() {
  for (auto& entry : subs_) close(entry.second);
}

void FanOutFetcher::close(Subscription& sub) {
  if (!sub.open) return;
  transport_->cancel(sub.id);
  by_id_.erase(sub.id);
  sub.open = false;
}

Status FanOutFetcher::subscribe(const Shard& shard, Subscription& sub, const StartOf& start_of) {
  ShardStart start;
  if (!sub.continuation.empty()) {
    start.kind = ShardStart::Kind::kAfterSequence;
    start.sequence = sub.continuation;
  } else {
    start = start_of(shard);
  }
  auto request =
      client_.request("SubscribeToShard", subscribe_body(consumer_arn_, shard.id, start));
  if (!request) return request.take_error();
  Millis now = clock_.steady();
  sub.subscribed = now;
  sub.due = now + kSubscribeInterval;
  ++calls_;
  auto id = transport_->start(*request);
  if (!id) return retry(shard.id, sub, id.error().message);
  sub.open = true;
  sub.id = *id;
  sub.decoder = EventStreamDecoder();
  sub.status = 0;
  sub.refusal.clear();
  sub.closed_known = closed_.count(shard.id) != 0;
  sub.got_event = false;
  by_id_[*id] = shard.id;
  return {};
}

Status FanOutFetcher::retry(const std::string& shard, Subscription& sub, std::string why) {
  close(sub);
  Millis now = clock_.steady();
  if (sub.failures++ == 0) sub.failing_since = now;
  sub.last_failure = std::move(why);
  Millis step = std::min<Millis>(kBackoffCap, kBackoffBase << std::min(sub.failures - 1, 10));
  jitter_ ^= jitter_ << 13;
  jitter_ ^= jitter_ >> 7;
  jitter_ ^= jitter_ << 17;
  Millis pause = static_cast<Millis>(jitter_ % static_cast<uint64_t>(step + 1));
  sub.due = std::max(now + pause, sub.subscribed + kSubscribeInterval);
  if (sub.due - sub.failing_since > timeout_)
    return failure("kinesis SubscribeToShard: no subscription to {} of stream '{}' within {}: {}",
                   shard, stream_, format_duration(timeout_), sub.last_failure);
  return {};
}

std::vector<Shard> FanOutFetcher::children_of(const std::string& id,
                                              const ShardLineage& lineage) const {
  std::map<std::string, Shard> found;
  auto look = [&](const std::map<std::string, Shard>& shards) {
    for (const auto& [sid, s] : shards)
      if (s.parent == id || s.adjacent_parent == id) found.emplace(sid, s);
  };
  look(lineage.shards());
  look(listed_);
  std::vector<Shard> out;
  for (auto& [sid, s] : found) out.push_back(std::move(s));
  return out;
}

Status FanOutFetcher::relist() {
  auto shards = list_shards(client_, stream_);
  if (!shards) return shards.take_error();
  listed_at_ = clock_.steady();
  for (auto& s : *shards) {
    if (s.closed()) closed_.insert(s.id);
    listed_[s.id] = std::move(s);
  }
  return {};
}

Status FanOutFetcher::take(const std::string& shard, Subscription& sub,
                           const StreamingTransport::Piece& piece, const ShardLineage& lineage,
                           const Got& got) {
  if (!sub.open || sub.id != piece.id) return {};
  if (piece.status != 0) sub.status = piece.status;
  if (sub.status != 200) {
    sub.refusal += piece.data;
  } else if (!piece.data.empty()) {
    Status fed = sub.decoder.feed(piece.data);
    if (!fed.ok()) {
      close(sub);
      return failure("kinesis SubscribeToShard: {} of stream '{}': {}", shard, stream_,
                     fed.error().message);
    }
    std::vector<EventMessage> messages = std::move(sub.decoder.messages());
    sub.decoder.messages().clear();
    for (const EventMessage& m : messages) {
      std::string_view type = m.header(":message-type");
      if (type == "exception" || type == "error") {
        std::string name(type == "error" ? m.header(":error-code") : m.header(":exception-type"));
        std::string message = type == "error" ? std::string(m.header(":error-message"))
                                              : parse_kinesis_error(m.payload).message;
        std::string why = message.empty() ? name : name + ": " + message;
        if (clears_by_itself(name)) return retry(shard, sub, why);
        close(sub);
        return failure("kinesis SubscribeToShard: {} of stream '{}': {}", shard, stream_, why);
      }
      // The initial-response (AWS's first message) and events of other
      // types carry no records.
      if (type != "event" || m.header(":event-type") != "SubscribeToShardEvent") continue;
      auto event = parse_shard_event(m.payload);
      if (!event) {
        close(sub);
        return failure("{} ({} of stream '{}')", event.error().message, shard, stream_);
      }
      sub.failures = 0;
      sub.got_event = true;
      ShardAnswer answer;
      answer.records = std::move(event->records);
      answer.millis_behind = event->millis_behind;
      // An event tells no time it was made at: the time it came is the
      // nearest.
      answer.sent = clock_.steady();
      answer.ended = !event->child_shards.empty() || event->continuation.empty() ||
                     (sub.closed_known && answer.records.empty() && answer.millis_behind == 0);
      if (answer.ended)
        answer.children =
            event->child_shards.empty() ? children_of(shard, lineage) : event->child_shards;
      if (!event->continuation.empty()) sub.continuation = std::move(event->continuation);
      // The lineage may change within: the shard goes as a copy.
      Shard copy;
      if (auto it = lineage.shards().find(shard); it != lineage.shards().end()) copy = it->second;
      if (answer.ended) close(sub);
      KPIPE_TRY(got(copy, answer));
      if (answer.ended) return {};
    }
  }
  if (!piece.done || !sub.open) return {};
  by_id_.erase(sub.id);
  sub.open = false;
  if (!piece.error.empty()) return retry(shard, sub, piece.error);
  if (sub.status != 200) {
    KinesisError e = parse_kinesis_error(sub.refusal);
    std::string why = e.type.empty() ? fmt::format("HTTP {}", sub.status)
                                     : e.type + (e.message.empty() ? "" : ": " + e.message);
    if (clears_by_itself(e.type) || is_retriable(sub.status, e)) return retry(shard, sub, why);
    return failure("kinesis SubscribeToShard: {} of stream '{}': {}", shard, stream_, why);
  }
  // A subscription that ends before its first event is a failure, so that
  // a service that keeps doing so is given up on at --timeout.
  if (!sub.got_event) return retry(shard, sub, "the subscription ended before its first event");
  // Its 5 minutes are over, or the service closed it: subscribed again
  // after its continuation, a second after the last at the earliest.
  sub.due = std::max(sub.due, sub.subscribed + kSubscribeInterval);
  ++renewed_;
  return {};
}

Status FanOutFetcher::fetch(const std::vector<std::string>& readable, const ShardLineage& lineage,
                            const StartOf& start_of, const Got& got) {
  // Shards no longer to be read (paused, read to their end) are
  // unsubscribed.
  std::set<std::string> wanted(readable.begin(), readable.end());
  for (auto it = subs_.begin(); it != subs_.end();) {
    if (wanted.count(it->first) != 0) {
      ++it;
      continue;
    }
    close(it->second);
    it = subs_.erase(it);
  }
  for (const auto& id : readable)
    if (auto it = lineage.shards().find(id); it != lineage.shards().end() && it->second.closed())
      closed_.insert(id);
  Millis now = clock_.steady();
  bool open_on_open_shard = std::any_of(subs_.begin(), subs_.end(), [this](const auto& s) {
    return s.second.open && closed_.count(s.first) == 0;
  });
  if (open_on_open_shard && now - listed_at_ >= kRelistInterval) {
    KPIPE_TRY(relist());
    // A shard closed since it was subscribed is subscribed again: the new
    // subscription knows it closed, and ends at its tip.
    for (auto& [id, sub] : subs_) {
      if (!sub.open || sub.closed_known || closed_.count(id) == 0) continue;
      close(sub);
      sub.due = std::max(sub.due, sub.subscribed + kSubscribeInterval);
      ++renewed_;
    }
  }
  Millis next_due = std::numeric_limits<Millis>::max();
  for (const auto& id : readable) {
    Subscription& sub = subs_[id];
    if (sub.open) continue;
    if (sub.due > now) {
      next_due = std::min(next_due, sub.due);
      continue;
    }
    auto it = lineage.shards().find(id);
    if (it == lineage.shards().end()) continue;
    Shard shard = it->second;
    KPIPE_TRY(subscribe(shard, sub, start_of));
    if (!sub.open) next_due = std::min(next_due, sub.due);
  }
  Millis wait = next_due == std::numeric_limits<Millis>::max()
                    ? kLongestWait
                    : std::clamp<Millis>(next_due - now, 0, kLongestWait);
  if (by_id_.empty()) {
    clock_.sleep_for(wait);
    return {};
  }
  std::vector<StreamingTransport::Piece> pieces;
  Status waited = transport_->wait(wait, pieces);
  if (!waited.ok())
    return failure("kinesis SubscribeToShard: stream '{}': {}", stream_, waited.error().message);
  for (const auto& piece : pieces) {
    auto it = by_id_.find(piece.id);
    if (it == by_id_.end()) continue;
    std::string shard = it->second;
    KPIPE_TRY(take(shard, subs_[shard], piece, lineage, got));
  }
  return {};
}

}  // namespace kpipe
