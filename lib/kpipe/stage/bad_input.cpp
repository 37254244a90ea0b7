#include "kpipe/stage/bad_input.h"

#include "kpipe/choices.h"
#include "kpipe/dlq_entry.h"
#include "kpipe/store/dlq_store.h"
#include "kpipe/kafka/client.h"

namespace kpipe {

Expected<OnError> parse_on_error(std::string_view text) {
  auto i = parse_choice("--on-error mode", text, {"fail", "dlq", "skip"});
  if (!i) return i.take_error();
  return static_cast<OnError>(*i);
}

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
      headers_.push_back({h.name, h.value ? std::optional<std::string_view>(*h.value) : std::nullopt});
    std::optional<std::string_view> key, value;
    if (r.key) key = *r.key;
    if (r.value) value = *r.value;
    return producer_->produce(topic_, -1, key, value, headers_, r.timestamp);
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

Expected<std::unique_ptr<DeadLetterSink>> open_dead_letter_sink(const std::string& target,
                                                                const KafkaConfig* kafka,
                                                                Reporter& reporter) {
  if (target.empty()) return usage_error("--on-error dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  if (target.starts_with("kafka:")) {
    std::string topic = target.substr(6);
    if (topic.empty()) return usage_error("--dlq 'kafka:': the topic name is missing");
    if (kafka == nullptr) return usage_error("--dlq '{}' needs brokers: use -b or set KPIPE_BROKERS", target);
    auto producer = Producer::create(*kafka, reporter);
    if (!producer) return producer.take_error();
    // Without this, a missing topic would surface only at the first bad
    // line, after message.timeout.ms: say so at start instead.
    auto parts = (*producer)->partitions(topic);
    if (!parts) return failure("dead-letter store '{}': {}", target, parts.error().message);
    return std::unique_ptr<DeadLetterSink>(new KafkaDeadLetters(topic, std::move(*producer)));
  }
  auto store = DlqStore::open(target);
  if (!store) return store.take_error();
  return make_store_sink(std::move(*store));
}

BadInputHandler::BadInputHandler(OnError mode, std::unique_ptr<DeadLetterSink> sink, std::string stage,
                                 Clock& clock)
    : mode_(mode), sink_(std::move(sink)), stage_(std::move(stage)), clock_(clock) {
  last_sync_ = clock_.steady();
}

Status BadInputHandler::handle(const std::string& input, const Line& line, std::string_view reason) {
  switch (mode_) {
    case OnError::kFail:
      failed_ = true;
      return data_error("{}: line {}: {}", input, line.number, reason);
    case OnError::kSkip:
      ++skipped_;
      return {};
    case OnError::kDlq:
      return dead_letter(input, line, reason);
  }
  return {};
}

Status BadInputHandler::dead_letter(const std::string& input, const Line& line, std::string_view reason) {
  if (sink_ == nullptr) return failure("no dead-letter store: give --dlq");
  DeadLetter d;
  d.at = clock_.now();
  d.stage = stage_;
  d.reason = fmt::format("line {}: {}", line.number, reason);
  d.input = input;
  d.line = line.number;
  d.source = source_position(line.text);
  d.payload = line.text;
  KPIPE_TRY(sink_->write(d));
  ++dead_lettered_;
  if (unsynced_++ == 0) last_sync_ = clock_.steady();
  // Batched, but bounded: a crash loses at most a moment of dead letters,
  // and a checkpoint never passes before they are durable (sync()).
  if (unsynced_ >= kSyncEvery) return sync();
  return tick();
}

Status BadInputHandler::tick() {
  if (unsynced_ == 0 || clock_.steady() - last_sync_ < kSyncInterval) return {};
  return sync();
}

Status BadInputHandler::sync() {
  last_sync_ = clock_.steady();
  if (sink_ == nullptr || unsynced_ == 0) return {};
  unsynced_ = 0;
  return sink_->sync();
}

std::string BadInputHandler::summary() const {
  if (skipped_ > 0) return fmt::format("skipped {} bad line{}", skipped_, skipped_ == 1 ? "" : "s");
  if (dead_lettered_ > 0 && sink_ != nullptr)
    return fmt::format("sent {} line{} to the dead-letter store {}", dead_lettered_,
                       dead_lettered_ == 1 ? "" : "s", sink_->describe());
  return {};
}

}  // namespace kpipe
