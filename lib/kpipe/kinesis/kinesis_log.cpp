#include "kpipe/kinesis/kinesis_log.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <utility>

#include "kpipe/dlq_replay.h"
#include "kpipe/json.h"
#include "kpipe/kinesis/aws_credentials.h"
#include "kpipe/kinesis/fan_out.h"
#include "kpipe/kinesis/http.h"
#include "kpipe/kinesis/kinesis_client.h"
#include "kpipe/kinesis/kinesis_log_internal.h"
#include "kpipe/kinesis/put_records.h"
#include "kpipe/kinesis/shards.h"
#include "kpipe/kinesis/stream_reader.h"

namespace kpipe {

namespace {

// The service's rule for stream and consumer names: 1 to 128 of
// [a-zA-Z0-9_.-].
bool is_kinesis_name(std::string_view name) {
  return !name.empty() && name.size() <= 128 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

}  // namespace

bool is_kinesis_target(std::string_view target) {
  return target.starts_with(kKinesisPrefix);
}

Expected<KinesisStreamName> parse_kinesis_target(std::string_view target) {
  std::string_view rest = target.substr(std::min(target.size(), kKinesisPrefix.size()));
  KinesisStreamName out;
  if (rest.starts_with("arn:")) {
    // arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME
    std::vector<std::string_view> parts;
    std::string_view s = rest;
    for (int i = 0; i < 5; ++i) {
      size_t colon = s.find(':');
      if (colon == std::string_view::npos) break;
      parts.push_back(s.substr(0, colon));
      s.remove_prefix(colon + 1);
    }
    if (parts.size() != 5 || parts[2] != "kinesis" || parts[3].empty() || !s.starts_with("stream/"))
      return usage_error(
          "'{}': not a Kinesis stream's ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME)", target);
    out.region = std::string(parts[3]);
    rest = s.substr(7);
  }
  if (!is_kinesis_name(rest))
    return usage_error(
        "'{}': a Kinesis stream's name is 1 to 128 letters, digits, '_', '.' and '-'", target);
  out.name = std::string(rest);
  return out;
}

Status check_consumer_name(std::string_view name) {
  if (is_kinesis_name(name)) return {};
  return usage_error("--efo '{}': a consumer's name is 1 to 128 letters, digits, '_', '.' and '-'",
                     name);
}

Expected<std::string> parse_explicit_hash_key(std::string_view digits) {
  // 2^128 - 1, the top of the hash key space the shards' ranges cut up.
  constexpr std::string_view kMax = "340282366920938463463374607431768211455";
  std::string_view shown = digits.size() > 48 ? digits.substr(0, 45) : digits;
  auto refuse = [&] {
    return data_error("'{}{}' is not a decimal integer from 0 to 2^128-1", shown,
                      shown.size() < digits.size() ? "..." : "");
  };
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return refuse();
  std::string_view n = digits.substr(std::min(digits.find_first_not_of('0'), digits.size() - 1));
  if (n.size() > kMax.size() || (n.size() == kMax.size() && n > kMax)) return refuse();
  return std::string(n);
}

class KinesisLogImpl {
 public:
  KinesisLogImpl(AwsSettings settings, std::string stream, std::shared_ptr<HttpTransport> http,
                 CredentialSource credentials, Clock& clock, Millis timeout)
      : settings_(std::move(settings)),
        stream_(std::move(stream)),
        http_(std::move(http)),
        clock_(clock),
        timeout_(timeout),
        client_(settings_, std::move(credentials), *http_, clock, timeout) {}

  const AwsSettings& settings() const { return settings_; }
  const std::string& stream() const { return stream_; }
  KinesisClient& client() { return client_; }
  // For -v; none in tests.
  Reporter* reporter() const { return reporter_; }
  void set_reporter(Reporter* r) { reporter_ = r; }
  Clock& clock() { return clock_; }
  Millis timeout() const { return timeout_; }

  // Every shard of `name`, every page; nullopt when there is no such
  // stream (`missing_ok`) or an error naming it.
  Expected<std::optional<std::vector<Shard>>> shards(const std::string& name, bool missing_ok) {
    std::vector<Shard> out;
    std::string token;
    do {
      std::string body;
      if (token.empty()) {
        body = R"({"StreamName":)";
        append_json_string(body, name);
      } else {
        body = R"({"NextToken":)";
        append_json_string(body, token);
      }
      body += "}";
      auto answer = client_.call("ListShards", body);
      if (!answer) {
        if (client_.last_error().type == "ResourceNotFoundException") {
          if (missing_ok) return std::optional<std::vector<Shard>>();
          return failure("kinesis stream '{}' does not exist (region {}, endpoint {})", name,
                         settings_.region, settings_.endpoint);
        }
        return answer.take_error();
      }
      auto page = parse_list_shards(*answer);
      if (!page) return page.take_error();
      for (auto& s : page->shards) out.push_back(std::move(s));
      token = page->next_token;
    } while (!token.empty());
    return std::optional<std::vector<Shard>>(std::move(out));
  }

 private:
  AwsSettings settings_;
  std::string stream_;
  std::shared_ptr<HttpTransport> http_;
  Clock& clock_;
  Millis timeout_;
  KinesisClient client_;
  Reporter* reporter_ = nullptr;
};

namespace {

std::vector<int32_t> partitions_of(const std::vector<Shard>& shards) {
  std::vector<int32_t> out;
  for (const auto& s : shards) out.push_back(s.partition);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// What a reader and a writer of a stream both answer (LogMetadata).
class KinesisMetadata : public virtual LogMetadata {
 public:
  explicit KinesisMetadata(std::shared_ptr<KinesisLogImpl> impl) : impl_(std::move(impl)) {}

  Expected<std::vector<int32_t>> partitions(const std::string& name) override {
    auto shards = impl_->shards(name, false);
    if (!shards) return shards.take_error();
    return partitions_of(**shards);
  }
  Expected<std::optional<std::vector<int32_t>>> existing_partitions(
      const std::string& name) override {
    auto shards = impl_->shards(name, true);
    if (!shards) return shards.take_error();
    if (!*shards) return std::optional<std::vector<int32_t>>();
    return std::optional<std::vector<int32_t>>(partitions_of(**shards));
  }
  Expected<std::map<std::string, std::vector<int32_t>>> topic_partitions() override {
    return failure("kinesis: every stream's shards are not listed; name the stream");
  }
  // A shard's bounds are sequence numbers with nothing between them to
  // count: nothing asks a Kinesis log for them (consecutive_positions()).
  Expected<std::vector<LogBounds>> bounds(const std::vector<TopicPartition>&) override {
    return failure("kinesis stream '{}': a shard has no offsets to bound (kpipe(7), LOGS)",
                   impl_->stream());
  }
  // A shard is read from a time as the service finds it (AT_TIMESTAMP):
  // the position is the time itself until a record is read.
  Expected<std::vector<Position>> positions_at(const std::vector<TopicPartition>& parts,
                                               const std::vector<Millis>& times) override {
    std::vector<Position> out;
    for (size_t i = 0; i < parts.size(); ++i)
      out.push_back(
          Position::arrived_at(times[i] == LogStart::kLatest ? impl_->clock().now() : times[i]));
    return out;
  }
  Expected<std::vector<std::optional<Millis>>> timestamps_at(
      const std::vector<PartitionOffset>& at) override {
    return std::vector<std::optional<Millis>>(at.size());
  }
  Millis timeout() const override { return impl_->timeout(); }
  bool consecutive_positions() const override { return false; }

 protected:
  Status check_stream(const std::string& name) const {
    if (name == impl_->stream()) return {};
    return failure("kinesis: this reads and writes stream '{}', not '{}'", impl_->stream(), name);
  }

  std::shared_ptr<KinesisLogImpl> impl_;
};

Expected<ShardStart> shard_start(const Position& p, const Shard& shard) {
  ShardStart start;
  if (p.is_sequence()) {
    start.kind = ShardStart::Kind::kAfterSequence;
    start.sequence = p.digits();
  } else if (p.is_time()) {
    start.kind = ShardStart::Kind::kAtTimestamp;
    start.time = p.time();
  } else if (p.offset() == LogStart::kEarliest) {
    start.kind = ShardStart::Kind::kTrimHorizon;
  } else if (p.offset() == LogStart::kLatest) {
    start.kind = ShardStart::Kind::kLatest;
  } else {
    return failure(
        "{} of a Kinesis stream cannot start at offset {}: a shard is read after a "
        "sequence number, or from a time (kpipe(7), LOGS)",
        shard.id, p.offset());
  }
  return start;
}

class KinesisReader final : public KinesisMetadata, public LogReader {
 public:
  // `consumer_arn`: read by enhanced fan-out as that consumer; "" polls.
  KinesisReader(std::shared_ptr<KinesisLogImpl> impl, std::string consumer_arn)
      : KinesisMetadata(std::move(impl)), consumer_arn_(std::move(consumer_arn)) {}

  Status assign(const std::vector<PartitionOffset>& parts) override {
    for (const auto& p : parts) {
      KPIPE_TRY(check_stream(p.topic));
      assigned_[p.partition] = p.offset;
    }
    if (consumer_arn_.empty()) {
      reader_ = std::make_unique<StreamReader>(impl_->client(), impl_->stream(), impl_->clock());
    } else {
      auto transport = make_curl_streaming();
      if (!transport) return failure("kinesis: cannot make a libcurl multi handle");
      reader_ = std::make_unique<StreamReader>(
          impl_->client(), impl_->stream(),
          std::make_unique<FanOutFetcher>(impl_->client(), impl_->stream(), consumer_arn_,
                                          std::move(transport), impl_->clock(), impl_->timeout()));
    }
    KPIPE_TRY(reader_->open([this](const Shard& shard) -> StreamReader::Plan {
      // A shard not assigned (a split's or a merge's child, made since
      // the caller listed the shards) is read from its start, added: the
      // caller pauses it if it wants none of it.
      auto it = assigned_.find(shard.partition);
      if (it == assigned_.end()) return {ShardStart{}, true};
      auto start = shard_start(it->second, shard);
      if (!start) {
        start_error_ = start.take_error();
        return {std::nullopt, false};
      }
      return {*start, false};
    }));
    return {};
  }

  Status poll(Millis timeout, size_t max_events, const EventHandler& handler) override {
    // A page of GetRecords is passed whole: max_events bounds Kafka's
    // batches, a shard's page is at most what the service gives (10 MiB).
    (void)max_events;
    if (!reader_) {
      impl_->clock().sleep_for(timeout);
      return {};
    }
    LogEvent e;
    Status s = reader_->poll([&](const StreamReader::Event& se) -> Status {
      const Shard& shard = *se.shard;
      e.record = RecordView();
      e.record.topic = impl_->stream();
      e.record.partition = shard.partition;
      switch (se.kind) {
        case StreamReader::Event::Kind::kRecord: {
          const KinesisRecord& r = *se.record;
          auto at = Position::sequence(r.sequence);
          if (!at)
            return failure("kinesis: {} of stream '{}' gave sequence number '{}', not a decimal",
                           shard.id, impl_->stream(), r.sequence);
          e.kind = LogEvent::Kind::kRecord;
          e.record.offset = *at;
          e.record.timestamp = r.arrival;
          e.record.key = r.partition_key;
          e.record.value = r.data;
          // Kinesis resumes after the sequence number kept.
          e.resume = std::move(*at);
          return handler(e);
        }
        case StreamReader::Event::Kind::kAdded:
          assigned_[shard.partition] = LogStart::kEarliest;
          e.kind = LogEvent::Kind::kAdded;
          e.resume = LogStart::kEarliest;
          return handler(e);
        case StreamReader::Event::Kind::kCaughtUp:
        case StreamReader::Event::Kind::kClosed:
          e.kind = se.kind == StreamReader::Event::Kind::kClosed ? LogEvent::Kind::kClosed
                                                                 : LogEvent::Kind::kCaughtUp;
          e.resume = resume_of(shard);
          e.record.offset = e.resume;
          return handler(e);
      }
      return {};
    });
    if (!start_error_.ok()) return std::exchange(start_error_, Status());
    return s;
  }

  Status pause(const std::vector<TopicPartition>& parts) override {
    if (!reader_) return {};
    for (const auto& tp : parts)
      for (const auto& [id, shard] : reader_->lineage().shards())
        if (shard.partition == tp.partition) reader_->pause(id);
    return {};
  }

  std::vector<TopicPartition> assignment() override {
    std::vector<TopicPartition> out;
    for (const auto& [p, at] : assigned_) out.push_back({impl_->stream(), p});
    return out;
  }

  std::optional<int64_t> lag_hint(const std::string&, int32_t) override { return std::nullopt; }

  Status close() override { return {}; }

 private:
  // Where a shard resumes: after its last record read, else where it was
  // started.
  Position resume_of(const Shard& shard) const {
    auto last = reader_->last_read().find(shard.id);
    if (last != reader_->last_read().end()) {
      if (auto p = Position::sequence(last->second)) return *p;
    }
    auto it = assigned_.find(shard.partition);
    return it == assigned_.end() ? Position(LogStart::kEarliest) : it->second;
  }

  std::string consumer_arn_;
  std::map<int32_t, Position> assigned_;
  std::unique_ptr<StreamReader> reader_;
  Status start_error_;
};

class KinesisLogWriter final : public KinesisMetadata, public LogWriter, public HashPlacement {
 public:
  explicit KinesisLogWriter(std::shared_ptr<KinesisLogImpl> impl)
      : KinesisMetadata(impl),
        writer_(impl->client(), impl->stream(), impl->clock(), impl->timeout()) {
    writer_.set_delivery_handler([this](uint64_t tag, const Error* err) {
      if (err == nullptr) {
        ++delivered_;
      } else {
        ++failed_;
        if (first_failure_.empty()) first_failure_ = err->message;
      }
      if (handler_) handler_(tag, err);
    });
  }

  void set_delivery_handler(DeliveryHandler handler) override { handler_ = std::move(handler); }

  Status write(const std::string& name, int32_t partition, std::optional<std::string_view> key,
               std::optional<std::string_view> value, const std::vector<Header>& headers,
               int64_t timestamp, uint64_t tag) override {
    // The service stamps each record's arrival itself.
    (void)timestamp;
    return put(name, partition, key, value, headers, {}, tag);
  }

  Status write_hashed(const std::string& name, std::optional<std::string_view> key,
                      std::optional<std::string_view> value, const std::vector<Header>& headers,
                      std::string_view hash_key, uint64_t tag) override {
    auto hash = parse_explicit_hash_key(hash_key);
    if (!hash) return data_error("the explicit hash key {}", hash.error().message);
    return put(name, -1, key, value, headers, std::move(*hash), tag);
  }

  // Deliveries are known as each batch is sent (write, flush).
  void poll(Millis wait) override { (void)wait; }

  Status flush(Millis timeout) override {
    (void)timeout;  // the writer's own, the log's --timeout
    return writer_.flush();
  }

  Expected<std::vector<int32_t>> await_partitions(const std::string& name) override {
    KPIPE_TRY(check_stream(name));
    return partitions(name);
  }

  uint64_t delivered() const override { return delivered_; }
  uint64_t failed() const override { return failed_; }
  std::string first_failure() const override { return first_failure_; }

 private:
  // `hash_key`: the record's ExplicitHashKey, "" for its key's hash.
  Status put(const std::string& name, int32_t partition, std::optional<std::string_view> key,
             std::optional<std::string_view> value, const std::vector<Header>& headers,
             std::string hash_key, uint64_t tag) {
    KPIPE_TRY(check_stream(name));
    if (partition >= 0)
      return failure(
          "kinesis: a record goes to the shard its partition key hashes to, not to "
          "partition {}",
          partition);
    if (!headers.empty())
      return data_error("a Kinesis record has no headers: drop them first (jq -c 'del(.headers)')");
    if (!value) return data_error("a Kinesis record cannot be a tombstone (a null value)");
    PutEntry entry;
    if (key) {
      entry.partition_key = std::string(*key);
    } else {
      // Kinesis needs a partition key: records without one are spread
      // over the shards, as Kafka spreads records without a key.
      entry.partition_key = fmt::format("kpipe-{}", unkeyed_++);
    }
    entry.data = std::string(*value);
    entry.explicit_hash_key = std::move(hash_key);
    entry.tag = tag;
    return writer_.write(std::move(entry));
  }

  KinesisWriter writer_;
  DeliveryHandler handler_;
  uint64_t delivered_ = 0;
  uint64_t failed_ = 0;
  uint64_t unkeyed_ = 0;
  std::string first_failure_;
};

// The record an entry replays as: the one it came from, with a partition
// key (its replay id when it had no key), its headers and timestamp left
// out. The same for the record sent and for the one searched for.
Expected<PutEntry> replay_entry(const ReplayItem& item, EnvelopeReader& reader) {
  OwnedRecord r = replay_record(item.entry, reader);
  if (!r.value)
    return failure("entry {} is a tombstone (a null value), which a Kinesis record cannot be",
                   item.replay_id);
  PutEntry e;
  e.partition_key = r.key && !r.key->empty() ? std::move(*r.key) : item.replay_id;
  e.data = std::move(*r.value);
  return e;
}

class KinesisReplayTarget final : public ReplayTarget {
 public:
  explicit KinesisReplayTarget(std::shared_ptr<KinesisLogImpl> impl)
      : impl_(std::move(impl)),
        writer_(impl_->client(), impl_->stream(), impl_->clock(), impl_->timeout()) {
    writer_.set_delivery_handler([this](uint64_t tag, const Error* err) {
      if (err == nullptr) {
        delivered_.push_back(tag);
      } else if (first_error_.empty()) {
        first_error_ = err->message;
      }
    });
  }

  std::string describe() const override { return "kinesis:" + impl_->stream(); }
  bool acknowledges_later() const override { return true; }
  bool finds_by_content() const override { return true; }

  Expected<bool> send(const ReplayItem& item, uint64_t tag) override {
    auto entry = replay_entry(item, reader_);
    if (!entry) return failure("cannot deliver to '{}': {}", describe(), entry.error().message);
    entry->tag = tag;
    Status sent = writer_.write(std::move(*entry));
    // A record the stream could never take is no bad input of the
    // replay's: the replay stops, as the Kafka target's does.
    if (!sent.ok()) return failure("cannot deliver to '{}': {}", describe(), sent.error().message);
    return true;
  }

  Status flush(std::vector<uint64_t>& delivered) override {
    Status s = writer_.flush();
    delivered.insert(delivered.end(), delivered_.begin(), delivered_.end());
    delivered_.clear();
    if (!first_error_.empty()) {
      std::string e = std::move(first_error_);
      first_error_.clear();
      return failure("cannot deliver to '{}': {}", describe(), e);
    }
    return s;
  }

  // A time, not the shards' ends: the service says no shard's last
  // sequence number without reading it.
  Expected<std::string> mark() override {
    return Position::arrived_at(impl_->clock().now() - kReplayMarkSkew).text();
  }

  // Every shard read from the mark to its tip (a child a split made since
  // from its start), until each in-doubt entry is found or the stream is
  // read as of now. Two entries that replay as the same record take one
  // record each.
  Expected<std::set<std::string>> delivered_since(
      const std::string& mark, const std::string&,
      const std::vector<ReplayItem>& in_doubt) override {
    auto from = Position::from_string(mark);
    if (!from || !from->is_time())
      return failure("'{}' keeps a replay mark '{}' that is not a time", describe(), mark);
    std::map<std::pair<std::string, std::string>, std::deque<std::string>> wanted;
    size_t left = 0;
    for (const ReplayItem& item : in_doubt) {
      auto entry = replay_entry(item, reader_);
      if (!entry) continue;  // never sent
      wanted[{std::move(entry->partition_key), std::move(entry->data)}].push_back(item.replay_id);
      ++left;
    }
    std::set<std::string> found;
    if (left == 0) return found;
    ShardStart start;
    start.kind = ShardStart::Kind::kAtTimestamp;
    start.time = from->time();
    StreamReader reader(impl_->client(), impl_->stream(), impl_->clock());
    KPIPE_TRY(reader.open([&](const Shard&) { return StreamReader::Plan{start, false}; }));
    Millis since = impl_->clock().steady();
    std::pair<std::string, std::string> probe;
    while (left > 0 && !reader.caught_up(since)) {
      KPIPE_TRY(reader.poll([&](const StreamReader::Event& e) -> Status {
        if (e.kind != StreamReader::Event::Kind::kRecord) return {};
        probe.first = e.record->partition_key;
        probe.second = e.record->data;
        auto it = wanted.find(probe);
        if (it == wanted.end() || it->second.empty()) return {};
        found.insert(std::move(it->second.front()));
        it->second.pop_front();
        --left;
        return {};
      }));
    }
    return found;
  }

 private:
  std::shared_ptr<KinesisLogImpl> impl_;
  KinesisWriter writer_;
  EnvelopeReader reader_;
  std::vector<uint64_t> delivered_;
  std::string first_error_;
};

// --dlq kinesis:STREAM: dead letters as records of a stream, written in
// PutRecords batches; sync() waits until each is acknowledged.
class KinesisDeadLetterSink final : public DeadLetterSink {
 public:
  explicit KinesisDeadLetterSink(std::shared_ptr<KinesisLogImpl> impl)
      : impl_(std::move(impl)),
        writer_(impl_->client(), impl_->stream(), impl_->clock(), impl_->timeout()) {
    writer_.set_delivery_handler([this](uint64_t, const Error* err) {
      if (err == nullptr) return;
      if (failed_++ == 0) first_failure_ = err->message;
    });
  }

  Status write(const DeadLetter& d) override {
    PutEntry entry;
    entry.partition_key =
        d.source ? fmt::format("{}/{}", d.source->topic, d.source->partition) : d.stage;
    if (entry.partition_key.empty()) entry.partition_key = "kpipe";
    // Topics and stages are ASCII in practice; a longer key is cut to
    // Kinesis's limit at a character's start.
    if (entry.partition_key.size() > kPartitionKeyMaxChars) {
      size_t cut = kPartitionKeyMaxChars;
      while (cut > 0 && (static_cast<unsigned char>(entry.partition_key[cut]) & 0xc0) == 0x80)
        --cut;
      entry.partition_key.resize(cut);
    }
    entry.data = dead_letter_json(d);
    Status s = writer_.write(std::move(entry));
    // The dead letter of a line refused as too large may be too large
    // itself: that is the store failing, not more bad input.
    if (!s.ok() && s.error().status == ExitStatus::kDataError)
      return failure("cannot write a dead letter to '{}': {}", describe(), s.error().message);
    return s;
  }

  Status sync() override {
    KPIPE_TRY(writer_.flush());
    if (failed_ > 0)
      return failure("{} dead letters not delivered to stream '{}': {}", failed_, impl_->stream(),
                     first_failure_);
    return {};
  }

  std::string describe() const override { return "kinesis:" + impl_->stream(); }

 private:
  std::shared_ptr<KinesisLogImpl> impl_;
  KinesisWriter writer_;
  uint64_t failed_ = 0;
  std::string first_failure_;
};

// The stream's dead letters, every shard from the given positions to its
// tip as of start(), a child after its parents.
class StreamDeadLetterLog final : public DeadLetterLog {
 public:
  explicit StreamDeadLetterLog(std::shared_ptr<KinesisLogImpl> impl) : impl_(std::move(impl)) {}

  std::string name() const override { return "kinesis:" + impl_->stream(); }

  Status start(const std::map<int32_t, Position>& from) override {
    reader_ = std::make_unique<StreamReader>(impl_->client(), impl_->stream(), impl_->clock());
    read_.clear();
    next_ = 0;
    KPIPE_TRY(reader_->open([&](const Shard& shard) {
      ShardStart start;  // from its start
      auto it = from.find(shard.partition);
      if (it != from.end() && it->second.is_sequence()) {
        start.kind = ShardStart::Kind::kAfterSequence;
        start.sequence = it->second.digits();
      }
      return StreamReader::Plan{start, false};
    }));
    since_ = impl_->clock().steady();
    return {};
  }

  Expected<std::vector<DlqEntry>> read(size_t max) override {
    std::vector<DlqEntry> out;
    while (read_.size() - next_ < max && reader_ && !reader_->caught_up(since_)) {
      KPIPE_TRY(reader_->poll([&](const StreamReader::Event& e) -> Status {
        if (e.kind != StreamReader::Event::Kind::kRecord) return {};
        auto at = Position::sequence(e.record->sequence);
        if (!at)
          return failure("kinesis: {} of stream '{}' gave sequence number '{}', not a decimal",
                         e.shard->id, impl_->stream(), e.record->sequence);
        DlqEntry entry = parse_dead_letter_json(e.record->data);
        // A record kpipe did not write was refused when it arrived.
        if (entry.at == 0) entry.at = e.record->arrival;
        entry.position = PartitionOffset{impl_->stream(), e.shard->partition, std::move(*at)};
        read_.push_back(std::move(entry));
        return {};
      }));
    }
    while (out.size() < max && next_ < read_.size()) out.push_back(std::move(read_[next_++]));
    if (next_ == read_.size()) {
      read_.clear();
      next_ = 0;
    }
    return out;
  }

  Position after(const Position& at) const override { return at; }
  std::optional<Position> parse_position(std::string_view text) const override {
    return Position::sequence(text);
  }
  std::map<int32_t, Position> origin() const override { return {}; }

 private:
  std::shared_ptr<KinesisLogImpl> impl_;
  std::unique_ptr<StreamReader> reader_;
  Millis since_ = 0;
  std::vector<DlqEntry> read_;
  size_t next_ = 0;
};

class StreamDeadLetters final : public DeadLetters {
 public:
  StreamDeadLetters(std::shared_ptr<KinesisLogImpl> impl,
                    std::unique_ptr<ReplayPositions> positions)
      : log_(std::move(impl)), positions_(std::move(positions)) {}

  Status scan(const DlqFilter& filter, size_t limit, bool, const Visit& fn) override {
    std::optional<ReplayPositions::Saved> saved;
    if (positions_) {
      auto loaded = positions_->load();
      if (!loaded) return loaded.take_error();
      saved = std::move(*loaded);
    }
    return scan_dead_letter_log(log_, saved ? &*saved : nullptr, filter, limit, fn);
  }

  Expected<int64_t> purge(bool, std::optional<Millis>, bool) override {
    return usage_error(
        "--dlq '{}': a stream deletes nothing; its entries expire with its retention period",
        log_.name());
  }

  Expected<std::unique_ptr<ReplayLedger>> replay_ledger(const DlqFilter& filter, size_t limit,
                                                        Clock&) override {
    if (!positions_)
      return usage_error("--dlq '{}': a replay keeps its position in --state STORE", log_.name());
    auto saved = positions_->load();
    if (!saved) return saved.take_error();
    return make_log_ledger(log_, *positions_, std::move(*saved), filter, limit);
  }

 private:
  StreamDeadLetterLog log_;
  std::unique_ptr<ReplayPositions> positions_;
};

// The stream a dead-letter store names, said missing as the Kafka sink
// says a missing topic.
Status check_dead_letter_stream(KinesisLogImpl& impl) {
  auto shards = impl.shards(impl.stream(), true);
  if (!shards)
    return failure("dead-letter store 'kinesis:{}': {}", impl.stream(), shards.error().message);
  if (!*shards)
    return failure("dead-letter store 'kinesis:{}': stream '{}' does not exist", impl.stream(),
                   impl.stream());
  return {};
}

}  // namespace

Expected<std::unique_ptr<ReplayTarget>> KinesisLog::replay_target() const {
  // Said missing at once, not at the first batch.
  auto shards = impl_->shards(impl_->stream(), false);
  if (!shards)
    return failure("replay target 'kinesis:{}': {}", impl_->stream(), shards.error().message);
  return std::unique_ptr<ReplayTarget>(new KinesisReplayTarget(impl_));
}

Expected<std::unique_ptr<DeadLetterSink>> KinesisLog::dead_letter_sink() const {
  KPIPE_TRY(check_dead_letter_stream(*impl_));
  return std::unique_ptr<DeadLetterSink>(new KinesisDeadLetterSink(impl_));
}

Expected<std::unique_ptr<DeadLetters>> KinesisLog::dead_letters(
    std::unique_ptr<ReplayPositions> positions) const {
  KPIPE_TRY(check_dead_letter_stream(*impl_));
  return std::unique_ptr<DeadLetters>(new StreamDeadLetters(impl_, std::move(positions)));
}

KinesisLog::KinesisLog(std::shared_ptr<KinesisLogImpl> impl) : impl_(std::move(impl)) {}
KinesisLog::KinesisLog(KinesisLog&&) noexcept = default;
KinesisLog& KinesisLog::operator=(KinesisLog&&) noexcept = default;
KinesisLog::~KinesisLog() = default;

Expected<KinesisLog> KinesisLog::open(const KinesisOptions& options, std::string_view target,
                                      std::string_view timeout_text, Reporter& reporter,
                                      Clock& clock) {
  const AwsEnvironment& env = options.env;
  auto name = parse_kinesis_target(target);
  if (!name) return name.take_error();
  if (!name->region.empty() && !options.region.empty() && name->region != options.region)
    return usage_error("--region {}: the stream's ARN is in region {}", options.region,
                       name->region);
  std::string region = options.region.empty() ? name->region : options.region;
  auto timeout = parse_duration(timeout_text);
  if (!timeout) return usage_error("--timeout: {}", timeout.error().message);
  if (*timeout <= 0) return usage_error("--timeout must be positive");
  auto settings = resolve_aws_settings(region, options.endpoint, env, &read_text_file);
  if (!settings) return settings.take_error();
  std::shared_ptr<HttpTransport> http = make_curl_transport();
  // The chain is walked when the first call needs credentials, and again
  // before temporary ones expire (KinesisClient); STS and the metadata
  // service have a connection of their own.
  // -v says where they came from (never what they are), once.
  auto said = std::make_shared<bool>(false);
  CredentialSource credentials = [env, s = *settings, http, &clock, &reporter, said,
                                  stream = name->name]() -> Expected<AwsCredentials> {
    auto found = find_aws_credentials(env, s, *http, &read_text_file, clock);
    if (found && !*said) {
      *said = true;
      reporter.info(fmt::format("kinesis stream '{}' in {} at {}, credentials from {}", stream,
                                s.region, s.endpoint, found->source));
    }
    return found;
  };
  KinesisLog log = make_kinesis_log(std::move(*settings), name->name, make_curl_transport(),
                                    std::move(credentials), clock, *timeout);
  log.impl_->set_reporter(&reporter);
  return log;
}

KinesisLog make_kinesis_log(AwsSettings settings, std::string stream,
                            std::shared_ptr<HttpTransport> http, CredentialSource credentials,
                            Clock& clock, Millis timeout) {
  return KinesisLog(std::make_shared<KinesisLogImpl>(std::move(settings), std::move(stream),
                                                     std::move(http), std::move(credentials), clock,
                                                     timeout));
}

const std::string& KinesisLog::stream() const {
  return impl_->stream();
}

const AwsSettings& KinesisLog::settings() const {
  return impl_->settings();
}

Expected<OpenedReader> KinesisLog::reader(const std::string& efo_consumer) const {
  std::string consumer_arn;
  if (!efo_consumer.empty()) {
    KPIPE_TRY(check_consumer_name(efo_consumer));
    bool registered = false;
    auto arn = register_consumer(impl_->client(), impl_->stream(), efo_consumer, impl_->clock(),
                                 impl_->timeout(), &registered);
    if (!arn) return arn.take_error();
    if (impl_->reporter() != nullptr)
      impl_->reporter()->info(fmt::format(
          "enhanced fan-out as consumer '{}' of stream '{}' ({}): it stays registered, the "
          "user's to deregister",
          efo_consumer, impl_->stream(), registered ? "registered now" : "registered before"));
    consumer_arn = std::move(*arn);
  }
  OpenedReader out;
  out.log = std::make_unique<KinesisReader>(impl_, std::move(consumer_arn));
  return out;
}

Expected<OpenedWriter> KinesisLog::writer() const {
  auto writer = std::make_unique<KinesisLogWriter>(impl_);
  OpenedWriter out;
  out.hashing = writer.get();
  out.log = std::move(writer);
  return out;
}

Expected<std::vector<KinesisLog::ShardNext>> KinesisLog::next_arrivals(
    const std::map<int32_t, Position>& from) const {
  auto listed = impl_->shards(impl_->stream(), false);
  if (!listed) return listed.take_error();
  const std::vector<Shard>& shards = **listed;
  std::set<std::string> parents_of_read;
  for (const auto& s : shards) {
    if (from.count(s.partition) == 0) continue;
    parents_of_read.insert(s.parent);
    parents_of_read.insert(s.adjacent_parent);
  }
  std::vector<ShardNext> out;
  for (const auto& s : shards) {
    ShardNext next{s.partition, std::nullopt};
    auto at = from.find(s.partition);
    if (at == from.end() && s.closed() && parents_of_read.count(s.id) != 0) continue;
    ShardStart start;  // a shard not read yet: from its start
    if (at != from.end()) {
      auto given = shard_start(at->second, s);
      if (!given) return given.take_error();
      start = std::move(*given);
    }
    if (start.kind != ShardStart::Kind::kLatest) {
      auto arrival = first_arrival(impl_->client(), impl_->stream(), s, start, impl_->clock(),
                                   impl_->timeout());
      if (!arrival) return arrival.take_error();
      next.arrival = *arrival;
    }
    out.push_back(next);
  }
  std::sort(out.begin(), out.end(),
            [](const ShardNext& a, const ShardNext& b) { return a.partition < b.partition; });
  return out;
}

}  // namespace kpipe
