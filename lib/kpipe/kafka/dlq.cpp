#include "kpipe/kafka/dlq.h"

#include <charconv>
#include <set>

#include "kpipe/json.h"
#include "kpipe/line.h"

namespace kpipe {

std::string default_replay_group(const std::string& topic) {
  return default_replay_ledger(topic);
}

namespace {

// "[[0,12],[1,40]]": a topic's end offsets, as ledgers keep them.
std::string format_mark(const std::map<int32_t, int64_t>& ends) {
  std::string out = "[";
  for (const auto& [p, o] : ends) {
    if (out.size() > 1) out.push_back(',');
    out.append(fmt::format("[{},{}]", p, o));
  }
  out.push_back(']');
  return out;
}

Expected<std::map<int32_t, int64_t>> parse_mark(const std::string& text) {
  auto v = parse_json(text);
  if (!v || v->type != JsonType::kArray) return failure("unreadable replay mark '{}'", text);
  std::map<int32_t, int64_t> out;
  for (const JsonValue& pair : v->items) {
    if (pair.type != JsonType::kArray || pair.items.size() != 2 || !pair.items[0].is_integer ||
        !pair.items[1].is_integer)
      return failure("unreadable replay mark '{}'", text);
    out[static_cast<int32_t>(pair.items[0].integer)] = pair.items[1].integer;
  }
  return out;
}

// Reads a topic from given offsets up to the high watermarks of the
// moment, calling `fn` for each record.
Status read_until_end(Consumer& consumer, const std::string& topic,
                      const std::map<int32_t, int64_t>& from, Clock& clock,
                      const std::function<Status(const RecordView&)>& fn) {
  auto parts = consumer.partitions(topic);
  if (!parts) return parts.take_error();
  std::vector<TopicPartition> tps;
  for (int32_t p : *parts) tps.push_back({topic, p});
  auto marks = consumer.bounds(tps);
  if (!marks) return marks.take_error();
  std::vector<PartitionOffset> assign;
  std::map<int32_t, int64_t> end;
  for (size_t i = 0; i < tps.size(); ++i) {
    auto it = from.find(tps[i].partition);
    int64_t start = std::max(it == from.end() ? (*marks)[i].low : it->second, (*marks)[i].low);
    if (start >= (*marks)[i].high) continue;
    assign.push_back({topic, tps[i].partition, start});
    end[tps[i].partition] = (*marks)[i].high;
  }
  if (assign.empty()) return {};
  KPIPE_TRY(consumer.assign(assign));
  Millis last_progress = clock.steady();
  while (!end.empty()) {
    bool progress = false;
    KPIPE_TRY(consumer.poll(100, 4096, [&](const LogEvent& e) -> Status {
      auto it = end.find(e.record.partition);
      if (it == end.end()) return {};
      progress = true;
      if (e.kind == LogEvent::Kind::kRecord && e.record.offset < it->second)
        KPIPE_TRY(fn(e.record));
      if (e.record.offset.offset() + (e.kind == LogEvent::Kind::kRecord ? 1 : 0) >= it->second)
        end.erase(it);
      return {};
    }));
    Millis now = clock.steady();
    if (progress) last_progress = now;
    if (now - last_progress > consumer.config().timeout)
      return failure("reading topic '{}' made no progress within {}", topic,
                     format_duration(consumer.config().timeout));
  }
  return consumer.assign({});
}

}  // namespace

// --- the dead-letter topic -----------------------------------------------------

Expected<std::unique_ptr<KafkaDlq>> KafkaDlq::open(const std::string& topic,
                                                   const KafkaConfig& config,
                                                   const std::string& group, Reporter& reporter,
                                                   Clock& clock, AclOperation group_use) {
  std::unique_ptr<KafkaDlq> dlq(new KafkaDlq());
  dlq->topic_ = topic;
  dlq->group_ = group.empty() ? default_replay_group(topic) : group;
  dlq->clock_ = &clock;
  auto consumer = Consumer::create(config, dlq->group_, reporter, clock);
  if (!consumer) return consumer.take_error();
  dlq->consumer_ = std::move(*consumer);
  dlq->consumer_->set_access(AclOperation::kRead, group_use);
  auto parts = dlq->consumer_->partitions(topic);
  if (!parts) return failure("dead-letter store 'kafka:{}': {}", topic, parts.error().message);
  std::vector<TopicPartition> tps;
  for (int32_t p : *parts) tps.push_back({topic, p});
  auto marks = dlq->consumer_->bounds(tps);
  if (!marks) return marks.take_error();
  for (size_t i = 0; i < tps.size(); ++i) dlq->bounds_[tps[i].partition] = (*marks)[i];
  return dlq;
}

Expected<ReplayPositions::Saved> KafkaDlq::load() {
  std::vector<TopicPartition> tps;
  for (const auto& [p, w] : bounds_) tps.push_back({topic_, p});
  std::vector<std::string> metadata;
  auto committed = consumer_->committed(tps, &metadata);
  if (!committed) return committed.take_error();
  Saved pos;
  for (size_t i = 0; i < tps.size(); ++i) {
    const LogBounds& w = bounds_[tps[i].partition];
    // Below the low watermark, retention has taken what was there.
    pos.next[tps[i].partition] = std::max((*committed)[i].value_or(w.low), w.low);
    if (!metadata[i].empty()) pos.metadata = metadata[i];
  }
  return pos;
}

Status KafkaDlq::save(const Saved& saved) {
  std::vector<PartitionOffset> offsets;
  for (const auto& [p, o] : saved.next) offsets.push_back({topic_, p, o});
  // kdlq commits without joining: a group with members refuses, and a
  // position not stored is an error here, not a rebalance to ride out.
  bool stored = true;
  KPIPE_TRY(consumer_->commit(offsets, &stored, saved.metadata));
  if (!stored)
    return failure(
        "group '{}' refused the replay position: consumers use it; give kdlq its own --group",
        group_);
  return {};
}

std::optional<Position> KafkaDlq::parse_position(std::string_view text) const {
  int64_t o = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), o);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size())
    return std::nullopt;
  return Position(o);
}

std::map<int32_t, Position> KafkaDlq::origin() const {
  std::map<int32_t, Position> out;
  for (const auto& [p, w] : bounds_) out[p] = w.low;
  return out;
}

Status KafkaDlq::start(const std::map<int32_t, Position>& from) {
  // One partition at a time, in order: entries come out in the same order
  // on every run (partition, then offset).
  queue_.clear();
  current_ = 0;
  for (const auto& [p, w] : bounds_) {
    auto it = from.find(p);
    int64_t start = std::max(it == from.end() ? w.low : it->second.offset(), w.low);
    if (start < w.high) queue_.push_back({topic_, p, start});
  }
  if (queue_.empty()) return consumer_->assign({});
  return consumer_->assign({queue_[0]});
}

Expected<std::vector<DlqEntry>> KafkaDlq::read(size_t max) {
  std::vector<DlqEntry> out;
  Millis last_progress = clock_->steady();
  while (out.size() < max && current_ < queue_.size()) {
    const int32_t partition = queue_[current_].partition;
    const int64_t end = bounds_[partition].high;
    bool progress = false;
    bool done = false;
    KPIPE_TRY(consumer_->poll(100, max - out.size(), [&](const LogEvent& e) -> Status {
      if (done || e.record.partition != partition) return {};
      progress = true;
      if (e.kind == LogEvent::Kind::kCaughtUp || e.record.offset >= end) {
        done = e.record.offset >= end;
        return {};
      }
      out.push_back(decode_dead_letter(e.record));
      done = e.record.offset.offset() + 1 >= end;
      return {};
    }));
    if (done) {
      ++current_;
      KPIPE_TRY(consumer_->assign(current_ < queue_.size()
                                      ? std::vector<PartitionOffset>{queue_[current_]}
                                      : std::vector<PartitionOffset>{}));
    }
    Millis now = clock_->steady();
    if (progress) last_progress = now;
    if (now - last_progress > consumer_->config().timeout)
      return failure("reading topic '{}' made no progress within {}", topic_,
                     format_duration(consumer_->config().timeout));
  }
  return out;
}

Status KafkaDlq::delete_before(const std::map<int32_t, int64_t>& before) {
  std::vector<PartitionOffset> offsets;
  for (const auto& [p, o] : before) offsets.push_back({topic_, p, o});
  return consumer_->delete_records(offsets);
}

// --- the consumer group as a ledger ------------------------------------------------

Expected<std::unique_ptr<ReplayLedger>> make_group_ledger(KafkaDlq& dlq, const DlqFilter& filter,
                                                          size_t limit) {
  auto position = dlq.load();
  if (!position) return position.take_error();
  return make_log_ledger(dlq, dlq, std::move(*position), filter, limit);
}

namespace {

class TopicDeadLetters final : public DeadLetters {
 public:
  explicit TopicDeadLetters(std::unique_ptr<KafkaDlq> dlq) : dlq_(std::move(dlq)) {}

  // An entry is replayed when it lies before the group's position.
  Status scan(const DlqFilter& filter, size_t limit, bool, const Visit& fn) override {
    auto position = dlq_->load();
    if (!position) return position.take_error();
    return scan_dead_letter_log(*dlq_, &*position, filter, limit, fn);
  }

  // Each partition's prefix of entries that qualify.
  Expected<int64_t> purge(bool replayed, std::optional<Millis> before, bool dry_run) override {
    auto position = dlq_->load();
    if (!position) return position.take_error();
    std::map<int32_t, int64_t> cut;
    std::map<int32_t, bool> stopped;
    std::map<int32_t, int64_t> count;
    for (const auto& [p, w] : dlq_->bounds()) cut[p] = w.low;
    KPIPE_TRY(dlq_->start({}));
    for (;;) {
      auto entries = dlq_->read(1000);
      if (!entries) return entries.take_error();
      if (entries->empty()) break;
      for (const DlqEntry& e : *entries) {
        int32_t p = e.position->partition;
        if (stopped[p]) continue;
        bool qualifies = (!replayed || passed(*dlq_, *position, p, e.position->offset)) &&
                         (!before || e.at < *before);
        if (!qualifies) {
          stopped[p] = true;
          continue;
        }
        cut[p] = e.position->offset.offset() + 1;
        ++count[p];
      }
    }
    int64_t n = 0;
    std::map<int32_t, int64_t> to_delete;
    for (const auto& [p, c] : count) {
      n += c;
      if (c > 0) to_delete[p] = cut[p];
    }
    if (!dry_run && !to_delete.empty()) KPIPE_TRY(dlq_->delete_before(to_delete));
    return n;
  }

  Expected<std::unique_ptr<ReplayLedger>> replay_ledger(const DlqFilter& filter, size_t limit,
                                                        Clock&) override {
    return make_group_ledger(*dlq_, filter, limit);
  }

  std::string topic() const override { return dlq_->topic(); }

 private:
  std::unique_ptr<KafkaDlq> dlq_;
};

}  // namespace

std::unique_ptr<DeadLetters> make_topic_dead_letters(std::unique_ptr<KafkaDlq> dlq) {
  return std::make_unique<TopicDeadLetters>(std::move(dlq));
}

// --- a topic as the target ------------------------------------------------------------

namespace {

class KafkaTarget final : public ReplayTarget {
 public:
  KafkaTarget(std::string topic, std::unique_ptr<Producer> producer, KafkaConfig config,
              Reporter& reporter, Clock& clock)
      : topic_(std::move(topic)),
        producer_(std::move(producer)),
        config_(std::move(config)),
        reporter_(reporter),
        clock_(clock) {
    producer_->set_delivery_handler([this](uint64_t tag, const Error* err) {
      if (err == nullptr) {
        delivered_.push_back(tag);
      } else if (first_error_.empty()) {
        first_error_ = err->message;
      }
    });
  }

  std::string describe() const override { return "kafka:" + topic_; }
  bool acknowledges_later() const override { return true; }

  Expected<bool> send(const ReplayItem& item, uint64_t tag) override {
    OwnedRecord r = replay_record(item.entry, reader_);
    headers_.clear();
    for (const auto& h : r.headers) {
      // A record replayed before carries the id of that replay: this one
      // names the entry replayed now.
      if (h.name == dlq_header::kReplayId) continue;
      headers_.push_back(
          {h.name, h.value ? std::optional<std::string_view>(*h.value) : std::nullopt});
    }
    headers_.push_back({dlq_header::kReplayId, item.replay_id});
    std::optional<std::string_view> key, value;
    if (r.key) key = *r.key;
    if (r.value) value = *r.value;
    Status sent = producer_->write(topic_, -1, key, value, headers_, r.timestamp, tag);
    // A record the producer refuses is no bad input of the replay's: the
    // replay stops, as when the broker refuses it.
    if (!sent.ok() && sent.error().status == ExitStatus::kDataError)
      return failure("cannot deliver to '{}': {}", topic_, sent.error().message);
    KPIPE_TRY(sent);
    return true;
  }

  Status flush(std::vector<uint64_t>& delivered) override {
    Status s = producer_->flush(config_.timeout);
    delivered.insert(delivered.end(), delivered_.begin(), delivered_.end());
    delivered_.clear();
    if (!first_error_.empty()) {
      std::string e = std::move(first_error_);
      first_error_.clear();
      return failure("cannot deliver to '{}': {}", topic_, e);
    }
    return s;
  }

  // One ListOffsets request per batch. The partitions are looked up once:
  // records sent to a partition added since are found anyway, as
  // delivered_since reads partitions missing from a mark from their start.
  Expected<std::string> mark() override {
    if (parts_.empty()) {
      auto parts = producer_->partitions(topic_);
      if (!parts) return parts.take_error();
      for (int32_t p : *parts) parts_.push_back({topic_, p});
    }
    // The special time LogStart::kLatest asks for the end itself: one request,
    // never a search by timestamp.
    auto ends =
        producer_->positions_at(parts_, std::vector<Millis>(parts_.size(), LogStart::kLatest));
    if (!ends) return ends.take_error();
    std::map<int32_t, int64_t> high;
    for (size_t i = 0; i < parts_.size(); ++i) high[parts_[i].partition] = (*ends)[i].offset();
    return format_mark(high);
  }

  Expected<std::set<std::string>> delivered_since(const std::string& mark,
                                                  const std::string& prefix,
                                                  const std::vector<ReplayItem>&) override {
    auto from = parse_mark(mark);
    if (!from) return from.take_error();
    if (!consumer_) {
      auto c = Consumer::create(config_, "", reporter_, clock_);
      if (!c) return c.take_error();
      consumer_ = std::move(*c);
    }
    // Partitions added since the mark are read from their start.
    std::set<std::string> found;
    KPIPE_TRY(read_until_end(*consumer_, topic_, *from, clock_, [&](const RecordView& r) -> Status {
      for (const Header& h : r.headers) {
        if (h.name != dlq_header::kReplayId || !h.value || !h.value->starts_with(prefix)) continue;
        found.insert(std::string(*h.value));
      }
      return {};
    }));
    return found;
  }

 private:
  std::string topic_;
  std::unique_ptr<Producer> producer_;
  KafkaConfig config_;
  Reporter& reporter_;
  Clock& clock_;
  std::unique_ptr<Consumer> consumer_;
  std::vector<TopicPartition> parts_;
  EnvelopeReader reader_;
  std::vector<Header> headers_;
  std::vector<uint64_t> delivered_;
  std::string first_error_;
};

}  // namespace

Expected<std::unique_ptr<ReplayTarget>> make_kafka_target(const std::string& topic,
                                                          const KafkaConfig& config,
                                                          Reporter& reporter, Clock& clock) {
  auto producer = Producer::create(config, reporter, clock);
  if (!producer) return producer.take_error();
  // Looked up as kproduce looks up its topic (kproduce(1), THE TOPIC): one
  // the broker creates is waited for, and one it does not is said missing
  // without having been created by the asking.
  auto parts = (*producer)->await_partitions(topic);
  if (!parts) return failure("replay target 'kafka:{}': {}", topic, parts.error().message);
  return std::unique_ptr<ReplayTarget>(
      new KafkaTarget(topic, std::move(*producer), config, reporter, clock));
}

// --- The sink: dead letters written to a topic ------------------------------

namespace {

// Dead letters as Kafka records: the original line is the value; when it
// was an envelope, its key, value, headers and timestamp are restored so
// that the topic holds what the source topic held, plus context headers
// named as Kafka Connect names its own (see encode_dead_letter).
class KafkaDeadLetters final : public DeadLetterSink {
 public:
  KafkaDeadLetters(std::string topic, std::unique_ptr<Producer> producer)
      : topic_(std::move(topic)), producer_(std::move(producer)) {}

  Status write(const DeadLetter& d) override {
    OwnedRecord r = encode_dead_letter(d, reader_);
    headers_.clear();
    for (const auto& h : r.headers)
      headers_.push_back(
          {h.name, h.value ? std::optional<std::string_view>(*h.value) : std::nullopt});
    std::optional<std::string_view> key, value;
    if (r.key) key = *r.key;
    if (r.value) value = *r.value;
    Status sent = producer_->write(topic_, -1, key, value, headers_, r.timestamp);
    // The dead letter of a line refused as too large may be too large
    // itself: that is the store failing, not more bad input.
    if (!sent.ok() && sent.error().status == ExitStatus::kDataError)
      return failure("cannot write a dead letter to 'kafka:{}': {}", topic_, sent.error().message);
    return sent;
  }

  Status sync() override {
    KPIPE_TRY(producer_->flush(producer_->config().timeout));
    if (producer_->failed() > 0)
      return failure("{} dead letters not delivered to topic '{}': {}", producer_->failed(), topic_,
                     producer_->first_failure());
    return {};
  }

  std::string describe() const override { return "kafka:" + topic_; }

 private:
  std::string topic_;
  std::unique_ptr<Producer> producer_;
  EnvelopeReader reader_;
  std::vector<Header> headers_;
};

}  // namespace

Expected<std::unique_ptr<DeadLetterSink>> open_kafka_dead_letters(const std::string& topic,
                                                                  const KafkaConfig& config,
                                                                  Reporter& reporter,
                                                                  Clock& clock) {
  auto producer = Producer::create(config, reporter, clock);
  if (!producer) return producer.take_error();
  // Without this, a missing topic would surface only at the first bad
  // line, after message.timeout.ms: say so at start instead, as kproduce
  // does (kproduce(1), THE TOPIC).
  auto parts = (*producer)->await_partitions(topic);
  if (!parts) return failure("dead-letter store 'kafka:{}': {}", topic, parts.error().message);
  return std::unique_ptr<DeadLetterSink>(new KafkaDeadLetters(topic, std::move(*producer)));
}

}  // namespace kpipe
