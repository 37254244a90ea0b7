#include "kpipe/dead_letter.h"

#include "kpipe/choices.h"
#include "kpipe/dlq_store.h"
#include "kpipe/kafka.h"

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
// named as Kafka Connect names its own.
class KafkaDeadLetters final : public DeadLetterSink {
 public:
  KafkaDeadLetters(std::string topic, std::unique_ptr<Producer> producer)
      : topic_(std::move(topic)), producer_(std::move(producer)) {}

  Status write(const DeadLetter& d) override {
    std::string at = format_rfc3339(d.at);
    std::vector<Header> headers;
    std::optional<std::string_view> key;
    std::optional<std::string_view> value = d.payload;
    int64_t timestamp = 0;
    EnvelopeRecord rec;
    std::string padded(d.payload);
    padded.append(kJsonPadding, '\0');
    bool is_envelope = d.source && reader_.read(std::string_view(padded.data(), d.payload.size()), rec).ok();
    if (is_envelope) {
      key = rec.key ? std::optional<std::string_view>(*rec.key) : std::nullopt;
      value = rec.value ? std::optional<std::string_view>(*rec.value) : std::nullopt;
      timestamp = rec.timestamp.value_or(0);
      for (const auto& h : rec.headers)
        headers.push_back({h.name, h.value ? std::optional<std::string_view>(*h.value) : std::nullopt});
    }
    std::string partition = d.source ? std::to_string(d.source->partition) : "";
    std::string offset = d.source ? std::to_string(d.source->offset) : "";
    headers.push_back({"kpipe.error.reason", d.reason});
    headers.push_back({"kpipe.error.stage", d.stage});
    headers.push_back({"kpipe.error.at", at});
    if (d.source) {
      headers.push_back({"kpipe.source.topic", d.source->topic});
      headers.push_back({"kpipe.source.partition", partition});
      headers.push_back({"kpipe.source.offset", offset});
    }
    return producer_->produce(topic_, -1, key, value, headers, timestamp);
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
  // Batched, but bounded: a crash loses at most a moment of dead letters,
  // and a checkpoint never passes before they are durable (sync()).
  if (++unsynced_ >= 1000 || clock_.steady() - last_sync_ >= 200) return sync();
  return {};
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
