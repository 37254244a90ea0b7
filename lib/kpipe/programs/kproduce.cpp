#include "kpipe/programs/kproduce.h"

#include "kpipe/envelope.h"
#include "kpipe/json.h"
#include "kpipe/kafka/client.h"
#include "kpipe/programs/dlq_targets.h"

namespace kpipe {

namespace {

class ProduceStage final : public LineStage {
 public:
  ProduceStage(const ProduceOptions& options, Producer& producer, std::optional<FieldPath> key)
      : options_(options), producer_(producer) {
    if (key) {
      key_path_ = key->text();
      fields_.add(*key);
    }
  }

  Status on_line(const Line& line, Output&) override {
    if (options_.envelope) return produce_envelope(line);
    if (!encoder_.is_json(line.text)) {
      // The ondemand reader names the fault more precisely.
      Status why = reader_.read(line.text, fields_, values_);
      return why.ok() ? data_error("not valid JSON") : why;
    }
    std::optional<std::string_view> key;
    if (!key_path_.empty()) {
      KPIPE_TRY(reader_.read(line.text, fields_, values_));
      const JsonField& k = values_[0];
      switch (k.type) {
        case JsonType::kMissing: return data_error("field '{}' is missing", key_path_);
        case JsonType::kNull: break;
        case JsonType::kString: key = k.str; break;
        case JsonType::kObject:
        case JsonType::kArray:
          key_text_.clear();
          append_minified(key_text_, k.raw);
          key = key_text_;
          break;
        default: key = k.raw; break;
      }
    }
    KPIPE_TRY(producer_.produce(options_.topic, options_.partition, key, line.text, {}, 0));
    ++produced_;
    return {};
  }

  Status produce_envelope(const Line& line) {
    KPIPE_TRY(envelope_.read(line.text, record_));
    int32_t partition = options_.partition;
    if (options_.keep_partition) {
      if (!record_.partition) return data_error("field 'partition' is missing (--keep-partition)");
      partition = *record_.partition;
    }
    headers_.clear();
    for (const auto& h : record_.headers)
      headers_.push_back({h.name, h.value ? std::optional<std::string_view>(*h.value) : std::nullopt});
    std::optional<std::string_view> key, value;
    if (record_.key) key = *record_.key;
    if (record_.value) value = *record_.value;
    KPIPE_TRY(producer_.produce(options_.topic, partition, key, value, headers_, record_.timestamp.value_or(0)));
    ++produced_;
    return {};
  }

  Status on_idle(Output&) override {
    producer_.poll();
    return {};
  }

  void fill_counters(Counters& c) const override { c.out = producer_.delivered(); }

  uint64_t produced() const { return produced_; }

 private:
  const ProduceOptions& options_;
  Producer& producer_;
  std::string key_path_;
  FieldSet fields_;
  JsonReader reader_;
  std::vector<JsonField> values_;
  PayloadEncoder encoder_;
  EnvelopeReader envelope_;
  EnvelopeRecord record_;
  std::vector<Header> headers_;
  std::string key_text_;
  uint64_t produced_ = 0;
};

}  // namespace

Status run_produce(const ProduceOptions& options, Io& io) {
  if (options.topic.empty()) return usage_error("a topic is required: -t TOPIC");
  if (options.keep_partition && !options.envelope) return usage_error("--keep-partition needs --envelope");
  if (options.keep_partition && options.partition >= 0)
    return usage_error("--keep-partition and --partition cannot be combined");
  if (options.envelope && !options.key.empty())
    return usage_error("--key cannot be combined with --envelope (the envelope holds the key)");
  std::optional<FieldPath> key;
  if (!options.key.empty()) {
    auto parsed = FieldPath::parse(options.key);
    if (!parsed) return parsed.take_error();
    key = std::move(*parsed);
  }
  auto stats = parse_stats_interval(options.stats);
  if (!stats) return stats.take_error();
  auto config = resolve_kafka_config(options.kafka, io.env_brokers);
  if (!config) return config.take_error();
  auto bad = make_bad_input_handler(options.errors, io.program, io, &*config);
  if (!bad) return bad.take_error();
  auto producer = Producer::create(*config, io.reporter);
  if (!producer) return producer.take_error();
  if (options.partition >= 0) {
    auto parts = (*producer)->partitions(options.topic);
    if (!parts) return parts.take_error();
    if (std::find(parts->begin(), parts->end(), options.partition) == parts->end())
      return usage_error("topic '{}' has no partition {}", options.topic, options.partition);
  }
  ProduceStage stage(options, **producer, key);
  FilterSettings settings{options.input, *stats};
  Status run = run_filter(stage, settings, **bad, io);
  // Whatever happened, wait for what was queued: a record either reaches
  // the broker or is counted as lost, never dropped unnoticed.
  for (;;) {
    Status flushed = (*producer)->flush(kSecond);
    if (flushed.ok()) break;
    if (io.stop != nullptr && io.stop->load()) {
      KPIPE_TRY(run);
      return failure("stopped with records still undelivered: {}", flushed.error().message);
    }
  }
  KPIPE_TRY(run);
  uint64_t failed = (*producer)->failed();
  if (failed > 0)
    return failure("{} of {} records not delivered to '{}': {}", failed, stage.produced(), options.topic,
                   (*producer)->first_failure());
  io.reporter.info(fmt::format("produced {} records to '{}'", stage.produced(), options.topic));
  return {};
}

}  // namespace kpipe
