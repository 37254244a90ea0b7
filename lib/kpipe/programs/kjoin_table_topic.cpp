// kjoin's table in a Kafka topic, read to its end and then followed (kjoin(1), Tables).
#include "kpipe/programs/kjoin_internal.h"

#include <algorithm>
#include <map>

#include "kpipe/envelope.h"
#include "kpipe/kafka/client.h"
#include "kpipe/kafka/topic.h"

namespace kpipe::kjoin_internal {

namespace {

// A topic read as a table: each record's key is the table's key, the
// newest value wins, a tombstone deletes (kjoin(1), TABLES).
class KafkaTable final : public TableSource {
 public:
  KafkaTable(const JoinPlan& plan, KafkaConfig config, Io& io)
      : plan_(plan), config_(std::move(config)), io_(io), rows_(plan) {}

  const KafkaConfig* kafka_config() const override { return &config_; }
  bool rows_saved() const override { return true; }

  // The first bad record was told as it came (skip_bad); the count at exit.
  void at_exit(Reporter& reporter) const override {
    if (skipped_ > 1) reporter.warning(fmt::format("left out {} bad table rows in all", skipped_));
  }

  Status load(JoinEngine& engine) override {
    auto consumer = Consumer::create(config_, "", io_.reporter, io_.clock);
    if (!consumer) return consumer.take_error();
    consumer_ = std::move(*consumer);
    const std::string& topic = plan_.table.location;
    // A topic that is not there was named wrongly, as a file or an SQL
    // table would be (kjoin(1), Table problems). It is looked up in the
    // list of all topics, as kproduce's await_topic does: a metadata
    // request naming the topic would have the broker create it when the
    // client allows auto-creation (-X allow.auto.create.topics=true).
    KPIPE_TRY(check_topic_name(topic));
    auto topics = consumer_->topics();
    if (!topics) return topics.take_error();
    if (!std::binary_search(topics->begin(), topics->end(), topic)) {
      // The list leaves out the topics this principal may not describe:
      // asked by name, the cluster refuses such a topic, and the refusal
      // names the ACL (kpipe(7), SECURITY). Not asked when the question
      // would have the broker create the topic.
      const std::string* create = consumer_->config().get("allow.auto.create.topics");
      if (create == nullptr || *create != "true") {
        auto asked = consumer_->partitions(topic);
        if (!asked && is_not_authorized(asked.error())) return asked.take_error();
      }
      return usage_error("--table: there is no topic '{}' at {}", topic,
                         consumer_->config().brokers());
    }
    auto partitions = consumer_->partitions(topic);
    if (!partitions) return partitions.take_error();
    std::vector<PartitionOffset> assign;
    for (int32_t p : *partitions) {
      engine.add_partition(p);
      auto saved = engine.offsets().find(p);
      assign.push_back(
          {topic, p, saved == engine.offsets().end() ? kOffsetBeginning : saved->second});
      parts_.push_back({topic, p});
    }
    KPIPE_TRY(consumer_->assign(assign));
    return catch_up(engine);
  }

  // Reads until every partition is at the high watermark it had when
  // this began.
  Status catch_up(JoinEngine& engine) override {
    auto marks = consumer_->watermarks(parts_);
    if (!marks) return marks.take_error();
    std::map<int32_t, int64_t> end;
    for (size_t i = 0; i < parts_.size(); ++i) end[parts_[i].partition] = (*marks)[i].high;
    Millis last_progress = io_.clock.steady();
    while (true) {
      bool done = true;
      for (const auto& [p, high] : end) {
        auto at = engine.offsets().find(p);
        auto seen = position_.find(p);
        int64_t pos = std::max(at == engine.offsets().end() ? -1 : at->second,
                               seen == position_.end() ? -1 : seen->second);
        if (pos < high && high > 0) done = false;
      }
      if (done) return {};
      if (io_.stop != nullptr && io_.stop->load()) return {};
      size_t before = events_;
      KPIPE_TRY(poll(engine, 100));
      Millis now = io_.clock.steady();
      if (events_ != before) last_progress = now;
      if (now - last_progress > consumer_->config().timeout)
        return failure("reading table topic '{}' to its end made no progress within {}",
                       plan_.table.location, format_duration(consumer_->config().timeout));
    }
  }

  Status poll(JoinEngine& engine, Millis wait) override {
    return consumer_->poll(wait, 10'000, [&](const ConsumerEvent& e) -> Status {
      ++events_;
      const RecordView& r = e.record;
      if (e.kind == ConsumerEvent::Kind::kEndOfPartition) {
        position_[r.partition] = std::max(position_[r.partition], r.offset);
        return {};
      }
      position_[r.partition] = r.offset + 1;
      return apply(engine, r);
    });
  }

 private:
  Status apply(JoinEngine& engine, const RecordView& r) {
    if (!r.key) {
      KPIPE_TRY(skip_bad(r, "the record has no key"));
      engine.skip(r.partition, r.offset + 1);
      return {};
    }
    Millis time = r.timestamp;
    if (plan_.table_time_slot) {
      envelope_.clear();
      writer_.append(envelope_, r);
      envelope_.pop_back();
      auto row = rows_.read(rows_.pad(envelope_), false);
      if (!row) {
        KPIPE_TRY(skip_bad(r, row.error().message));
        engine.skip(r.partition, r.offset + 1);
        return {};
      }
      time = row->time;
    }
    std::optional<std::string_view> value;
    if (r.value) {
      value_.clear();
      writer_.append_value(value_, r);
      value_.pop_back();
      value = value_;
    }
    engine.apply(*r.key, time, value, r.partition, r.offset + 1);
    return {};
  }

  // A topic is never read whole: the first bad record is told at once,
  // the count at exit (at_exit).
  Status skip_bad(const RecordView& r, std::string_view why) {
    uint64_t before = skipped_;
    KPIPE_TRY(bad_row(fmt::format("table topic '{}': partition {} offset {}: {}",
                                  plan_.table.location, r.partition, r.offset, why)));
    if (before == 0 && skipped_ == 1)
      io_.reporter.warning(fmt::format(
          "left out a bad table row ({}): {}",
          on_error_ == OnError::kSkip ? "--on-error skip" : "--on-error dlq", first_bad_));
    return {};
  }

  const JoinPlan& plan_;
  KafkaConfig config_;
  std::unique_ptr<Consumer> consumer_;
  Io& io_;
  RowReader rows_;
  EnvelopeWriter writer_;
  std::string envelope_;
  std::string value_;
  std::vector<TopicPartition> parts_;
  std::map<int32_t, int64_t> position_;  // the next offset each partition reads
  size_t events_ = 0;
};

Expected<std::unique_ptr<TableSource>> open_topic_table(const JoinPlan& plan,
                                                        const JoinOptions& options, Io& io) {
  auto config = resolve_kafka_config(options.kafka, io.env_brokers);
  if (!config) return config.take_error();
  if (config->brokers().empty())
    return usage_error("--table {} needs brokers: use -b or set KPIPE_BROKERS", options.table);
  return std::unique_ptr<TableSource>(std::make_unique<KafkaTable>(plan, std::move(*config), io));
}

}  // namespace

const TableKind kTopicTable{.keyed_by_record = true, .open = &open_topic_table};

}  // namespace kpipe::kjoin_internal
