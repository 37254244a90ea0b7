// kjoin's table in a Kafka topic or a Kinesis stream, read to its end and then
// followed (kjoin(1), Tables).
#include "kpipe/programs/kjoin_internal.h"

#include <algorithm>
#include <map>
#include <set>

#include "kpipe/envelope.h"
#include "kpipe/kafka/kafka_log.h"
#include "kpipe/kinesis/kinesis_log.h"

namespace kpipe::kjoin_internal {

namespace {

// A topic read as a table: each record's key is the table's key, the
// newest value wins, a tombstone deletes (kjoin(1), TABLES). A Kinesis
// stream's shards are its partitions, a record's partition key its key.
class TopicTable final : public TableSource {
 public:
  TopicTable(const JoinPlan& plan, std::string topic, LogOpener open, std::string where,
             const KafkaLog* kafka, Io& io)
      : plan_(plan),
        topic_(std::move(topic)),
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
    const std::string& topic = topic_;
    // A topic that is not there was named wrongly, as a file or an SQL
    // table would be (kjoin(1), Table problems).
    auto partitions = log_->existing_partitions(topic);
    if (!partitions) return partitions.take_error();
    if (!*partitions)
      return usage_error("--table: there is no {} '{}' at {}", kinesis() ? "stream" : "topic",
                         topic, where_);
    std::vector<PartitionOffset> assign;
    for (int32_t p : **partitions) {
      engine.add_partition(p);
      shards_.insert(p);
      auto saved = engine.offsets().find(p);
      assign.push_back(
          {topic, p, saved == engine.offsets().end() ? LogStart::kEarliest : saved->second});
      parts_.push_back({topic, p});
    }
    KPIPE_TRY(log_->assign(assign));
    return catch_up(engine);
  }

  // Reads until every partition is at the high watermark it had when
  // this began; a Kinesis stream, whose shards have none, until every
  // shard is at its tip or closed and read to its end.
  Status catch_up(JoinEngine& engine) override {
    std::map<int32_t, int64_t> end;
    if (!kinesis()) {
      auto marks = log_->bounds(parts_);
      if (!marks) return marks.take_error();
      for (size_t i = 0; i < parts_.size(); ++i) end[parts_[i].partition] = (*marks)[i].high;
    }
    Millis last_progress = io_.clock.steady();
    while (true) {
      bool done = true;
      for (const auto& [p, high] : end) {
        auto at = engine.offsets().find(p);
        auto seen = position_.find(p);
        int64_t pos = std::max(at == engine.offsets().end() ? -1 : at->second.offset(),
                               seen == position_.end() ? -1 : seen->second.offset());
        if (pos < high && high > 0) done = false;
      }
      if (kinesis())
        for (int32_t p : shards_)
          if (at_tip_.count(p) == 0 && closed_.count(p) == 0) done = false;
      if (done) return {};
      if (io_.stop != nullptr && io_.stop->load()) return {};
      size_t before = events_;
      KPIPE_TRY(poll(engine, 100));
      Millis now = io_.clock.steady();
      if (events_ != before) last_progress = now;
      if (now - last_progress > log_->timeout())
        return failure("reading table {} '{}' to its end made no progress within {}",
                       kinesis() ? "stream" : "topic", topic_, format_duration(log_->timeout()));
    }
  }

  Status poll(JoinEngine& engine, Millis wait) override {
    return log_->poll(wait, 10'000, [&](const LogEvent& e) -> Status {
      ++events_;
      const RecordView& r = e.record;
      switch (e.kind) {
        case LogEvent::Kind::kRecord:
          at_tip_.erase(r.partition);
          position_[r.partition] = e.resume;
          return apply(engine, e);
        case LogEvent::Kind::kAdded:
          // A shard a split or a merge made: it holds the watermark from now.
          shards_.insert(r.partition);
          engine.add_partition(r.partition);
          return {};
        case LogEvent::Kind::kClosed:
          // Read to its end for good: it holds the watermark no longer.
          closed_.insert(r.partition);
          engine.close_partition(r.partition);
          break;
        default:
          at_tip_.insert(r.partition);
          break;
      }
      auto& at = position_[r.partition];
      at = std::max(at, e.resume);
      return {};
    });
  }

 private:
  Status apply(JoinEngine& engine, const LogEvent& e) {
    const RecordView& r = e.record;
    if (!r.key) {
      KPIPE_TRY(skip_bad(r, "the record has no key"));
      engine.skip(r.partition, e.resume);
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
        engine.skip(r.partition, e.resume);
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
    engine.apply(*r.key, time, value, r.partition, e.resume);
    return {};
  }

  // A topic is never read whole: the first bad record is told at once,
  // the count at exit (at_exit).
  Status skip_bad(const RecordView& r, std::string_view why) {
    uint64_t before = skipped_;
    KPIPE_TRY(
        bad_row(fmt::format("table {} '{}': partition {} offset {}: {}",
                            kinesis() ? "stream" : "topic", topic_, r.partition, r.offset, why)));
    if (before == 0 && skipped_ == 1)
      io_.reporter.warning(fmt::format(
          "left out a bad table row ({}): {}",
          on_error_ == OnError::kSkip ? "--on-error skip" : "--on-error dlq", first_bad_));
    return {};
  }

  const JoinPlan& plan_;
  std::string topic_;  // the topic, or the stream's name
  LogOpener open_;
  std::string where_;  // the log, as errors name it
  const KafkaLog* kafka_;
  std::unique_ptr<LogReader> log_;
  Io& io_;
  RowReader rows_;
  EnvelopeWriter writer_;
  std::string envelope_;
  std::string value_;
  bool kinesis() const { return !log_->consecutive_positions(); }

  std::vector<TopicPartition> parts_;
  std::map<int32_t, Position> position_;  // where each partition reads on
  // A Kinesis stream's shards: every one known, those at their tip (since
  // their last record), and those closed and read to their end.
  std::set<int32_t> shards_, at_tip_, closed_;
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

// A Kinesis stream as the table (kinesis:NAME, or a stream's ARN).
Expected<std::unique_ptr<TableSource>> open_stream_table(const JoinPlan& plan,
                                                         const JoinOptions& options, Io& io) {
  auto opened = KinesisLog::open(options.kinesis, plan.table.location, options.kafka.timeout,
                                 io.reporter, io.clock);
  if (!opened) return opened.take_error();
  auto log = std::make_shared<KinesisLog>(std::move(*opened));
  std::string where = fmt::format("{} ({})", log->settings().endpoint, log->settings().region);
  std::string stream = log->stream();
  LogOpener open = [log]() -> Expected<std::unique_ptr<LogReader>> {
    auto reader = log->reader();
    if (!reader) return reader.take_error();
    return std::move(reader->log);
  };
  return std::unique_ptr<TableSource>(std::make_unique<TopicTable>(
      plan, std::move(stream), std::move(open), std::move(where), nullptr, io));
}

}  // namespace

std::unique_ptr<TableSource> make_topic_table(const JoinPlan& plan, LogOpener open,
                                              std::string where, const KafkaLog* kafka, Io& io) {
  return std::make_unique<TopicTable>(plan, plan.table.location, std::move(open), std::move(where),
                                      kafka, io);
}

const TableKind kTopicTable{.keyed_by_record = true, .open = &open_topic_table};
const TableKind kStreamTable{.keyed_by_record = true, .open = &open_stream_table};

}  // namespace kpipe::kjoin_internal
