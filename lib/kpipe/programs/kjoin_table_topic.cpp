// kjoin's table in a Kafka topic, read to its end and then followed (kjoin(1), Tables).
#include "kpipe/programs/kjoin_internal.h"

#include <algorithm>
#include <map>

#include "kpipe/envelope.h"
#include "kpipe/kafka/kafka_log.h"

namespace kpipe::kjoin_internal {

namespace {

// A topic read as a table: each record's key is the table's key, the
// newest value wins, a tombstone deletes (kjoin(1), TABLES).
class TopicTable final : public TableSource {
 public:
  TopicTable(const JoinPlan& plan, LogOpener open, std::string where, const KafkaLog* kafka, Io& io)
      : plan_(plan),
        open_(std::move(open)),
        where_(std::move(where)),
        kafka_(kafka),
        io_(io),
        rows_(plan) {}

  const KafkaLog* kafka_log() const override { return kafka_; }
  bool rows_saved() const override { return true; }

  // The first bad record was told as it came (skip_bad); the count at exit.
  void at_exit(Reporter& reporter) const override {
    if (skipped_ > 1) reporter.warning(fmt::format("left out {} bad table rows in all", skipped_));
  }

  Status load(JoinEngine& engine) override {
    auto opened = open_();
    if (!opened) return opened.take_error();
    log_ = std::move(*opened);
    const std::string& topic = plan_.table.location;
    // A topic that is not there was named wrongly, as a file or an SQL
    // table would be (kjoin(1), Table problems).
    auto partitions = log_->existing_partitions(topic);
    if (!partitions) return partitions.take_error();
    if (!*partitions) return usage_error("--table: there is no topic '{}' at {}", topic, where_);
    std::vector<PartitionOffset> assign;
    for (int32_t p : **partitions) {
      engine.add_partition(p);
      auto saved = engine.offsets().find(p);
      assign.push_back(
          {topic, p, saved == engine.offsets().end() ? LogStart::kEarliest : saved->second});
      parts_.push_back({topic, p});
    }
    KPIPE_TRY(log_->assign(assign));
    return catch_up(engine);
  }

  // Reads until every partition is at the high watermark it had when
  // this began.
  Status catch_up(JoinEngine& engine) override {
    auto marks = log_->bounds(parts_);
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
      if (now - last_progress > log_->timeout())
        return failure("reading table topic '{}' to its end made no progress within {}",
                       plan_.table.location, format_duration(log_->timeout()));
    }
  }

  Status poll(JoinEngine& engine, Millis wait) override {
    return log_->poll(wait, 10'000, [&](const LogEvent& e) -> Status {
      ++events_;
      const RecordView& r = e.record;
      // A kafka: table's positions are offsets.
      int64_t resume = e.resume.offset();
      if (e.kind != LogEvent::Kind::kRecord) {
        position_[r.partition] = std::max(position_[r.partition], resume);
        return {};
      }
      position_[r.partition] = resume;
      return apply(engine, e);
    });
  }

 private:
  Status apply(JoinEngine& engine, const LogEvent& e) {
    const RecordView& r = e.record;
    if (!r.key) {
      KPIPE_TRY(skip_bad(r, "the record has no key"));
      engine.skip(r.partition, e.resume.offset());
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
        engine.skip(r.partition, e.resume.offset());
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
    engine.apply(*r.key, time, value, r.partition, e.resume.offset());
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
  LogOpener open_;
  std::string where_;  // the log, as errors name it
  const KafkaLog* kafka_;
  std::unique_ptr<LogReader> log_;
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
  auto opened = KafkaLog::open(options.kafka, io.env_brokers, io.reporter, io.clock);
  if (!opened) return opened.take_error();
  if (opened->config().brokers().empty())
    return usage_error("--table {} needs brokers: use -b or set KPIPE_BROKERS", options.table);
  // Opened at load, as the table is read, and kept with the source.
  auto log = std::make_shared<KafkaLog>(std::move(*opened));
  std::string where = log->config().brokers();
  LogOpener open = [log]() -> Expected<std::unique_ptr<LogReader>> {
    auto reader = log->reader({});
    if (!reader) return reader.take_error();
    return std::move(reader->log);
  };
  return make_topic_table(plan, std::move(open), std::move(where), log.get(), io);
}

}  // namespace

std::unique_ptr<TableSource> make_topic_table(const JoinPlan& plan, LogOpener open,
                                              std::string where, const KafkaLog* kafka, Io& io) {
  return std::make_unique<TopicTable>(plan, std::move(open), std::move(where), kafka, io);
}

const TableKind kTopicTable{.keyed_by_record = true, .open = &open_topic_table};

}  // namespace kpipe::kjoin_internal
