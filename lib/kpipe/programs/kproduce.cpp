#include "kpipe/programs/kproduce.h"
#include "kpipe/stage/checkpoint_meter.h"

#include <algorithm>
#include <deque>

#include <stdlib.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kpipe/control.h"
#include "kpipe/envelope.h"
#include "kpipe/json.h"
#include "kpipe/kafka/kafka_log.h"
#include "kpipe/kafka/topic.h"
#include "kpipe/programs/dlq_targets.h"
#include "kpipe/programs/payloads.h"
#include "kpipe/programs/stage_state.h"
#include "kpipe/store/state_store.h"

namespace kpipe {

namespace {

// The records sent and not yet acknowledged, oldest first. The broker's
// verdict on a record comes back after later lines were read: what is kept
// of each is what it takes to apply --on-error to it then (kpipe(7), BAD
// INPUT): the input, the line number, and under --on-error dlq the line.
class InFlight {
 public:
  struct Sent {
    uint32_t input = 0;  // an index into inputs_
    bool settled = false;
    bool delivered = false;
    uint64_t line = 0;
    std::string padded;  // the line and kJsonPadding bytes (dlq only)
  };

  // The tag the next record gets.
  uint64_t next_tag() const { return first_tag_ + sent_.size(); }

  void add(const Line& line, bool keep_text) {
    if (inputs_.empty() || inputs_.back() != line.input) inputs_.emplace_back(line.input);
    Sent s;
    s.input = static_cast<uint32_t>(inputs_.size() - 1);
    s.line = line.number;
    if (keep_text) {
      // Padded, as a LineFeed's lines are: the dead-letter store reads the
      // source position of an envelope with simdjson.
      s.padded.reserve(line.text.size() + kJsonPadding);
      s.padded.append(line.text);
      s.padded.append(kJsonPadding, '\0');
      held_ += line.text.size();
    }
    sent_.push_back(std::move(s));
  }

  // The line of a record in flight, as bad input handling takes it.
  Line line(uint64_t tag) const {
    const Sent& s = sent_[tag - first_tag_];
    Line l;
    l.number = s.line;
    l.input = inputs_[s.input];
    if (!s.padded.empty())
      l.text = std::string_view(s.padded).substr(0, s.padded.size() - kJsonPadding);
    return l;
  }
  const std::string& input(uint64_t tag) const { return inputs_[sent_[tag - first_tag_].input]; }

  void settle(uint64_t tag, bool delivered) {
    Sent& s = sent_[tag - first_tag_];
    s.settled = true;
    s.delivered = delivered;
    if (!s.padded.empty()) held_ -= s.padded.size() - kJsonPadding;
    std::string().swap(s.padded);
    while (!sent_.empty() && sent_.front().settled) {
      sent_.pop_front();
      ++first_tag_;
    }
  }

  // The records after `tag` delivered so far (they are all still here, as
  // `tag` is not settled), and the last of them.
  uint64_t delivered_after(uint64_t tag, uint64_t* last) const {
    uint64_t n = 0;
    for (uint64_t t = tag + 1; t < next_tag(); ++t) {
      if (!sent_[t - first_tag_].delivered) continue;
      ++n;
      *last = t;
    }
    return n;
  }

  bool empty() const { return sent_.empty(); }
  // Bytes of lines kept.
  size_t held() const { return held_; }

 private:
  std::deque<Sent> sent_;
  uint64_t first_tag_ = 0;
  std::vector<std::string> inputs_;
  size_t held_ = 0;
};

// --transactional (kpipe(7), EXACTLY ONCE INTO KAFKA): the records
// between two checkpoint lines go out in one transaction, which the
// second line commits together with its offsets for kconsume's group,
// tagged with its id; only then is the checkpoint complete in the state
// store. A crash in between is repaired by kconsume at its start.
class Transactions {
 public:
  Transactions(const ProduceOptions& options, LogTransactions& log, StateStore& store, Io& io)
      : options_(options), log_(log), store_(store), io_(io) {
    meter_.notify_to(io_.notifier);
  }

  // Fences the producer of the run before (a restart's zombie), aborting
  // what it left open. At once, not at the first line: until then the
  // group's offsets in its open transaction are unstable, and kconsume
  // waits for them before it writes anything.
  Status start() { return log_.init_transactions(); }

  // Before a record is sent: the transaction it goes in.
  Status before_record() { return begin(); }
  // After it was queued.
  void sent() { ++records_open_; }

  Status on_checkpoint(const Checkpoint& c) {
    if (c.group.empty())
      return failure(
          "checkpoint {} names no consumer group: --transactional commits kconsume's offsets to "
          "its group; run kconsume with -g GROUP",
          c.id);
    KPIPE_TRY(begin());
    KPIPE_TRY(log_.commit_transaction(c.offsets, c.group, checkpoint_commit_metadata({c.id, c.at}),
                                      c.member));
    open_ = false;
    committed_records_ += records_open_;
    records_open_ = 0;
    ++committed_;
    last_committed_ = c.id;
    // Kafka's commit is the commit point: were kproduce killed now,
    // kconsume would complete the checkpoint from the group's offsets.
    Millis now = io_.clock.now();
    KPIPE_TRY(store_.complete(c, kTransactionCompleter, now));
    return meter_completed(store_, meter_, c, now);
  }

  // At the end of input, after every record's delivery: records that no
  // checkpoint line followed are aborted, to be read again by the next
  // run.
  Status finish() {
    if (records_open_ > 0)
      io_.reporter.warning(fmt::format(
          "{} record{} after {} came without a checkpoint line: their transaction is aborted, "
          "and the next run reads them again{}",
          records_open_, records_open_ == 1 ? "" : "s",
          last_committed_ > 0 ? fmt::format("checkpoint {}", last_committed_) : "the start",
          committed_ > 0 ? ""
                         : " (run kconsume with --state, and make sure every stage in between "
                           "lets control lines through)"));
    return abort_open();
  }

  uint64_t records_open() const { return records_open_; }

  // The partitions whose records the open transaction holds were lost
  // (revoked with no checkpoint before): their next owner reads them again.
  Status abort_lost() {
    io_.reporter.warning(fmt::format(
        "{} record{} after {} belong to partitions this instance lost: their transaction is "
        "aborted, and their new owner reads them again",
        records_open_, records_open_ == 1 ? "" : "s",
        last_committed_ > 0 ? fmt::format("checkpoint {}", last_committed_) : "the start"));
    return abort_open();
  }

  // Aborts the open transaction, if any: after a failure too, so that
  // the group's offsets are stable again at once, not after Kafka's
  // transaction timeout.
  Status abort_open() {
    if (!open_) return {};
    open_ = false;
    records_open_ = 0;
    return log_.abort_transaction();
  }

  uint64_t committed() const { return committed_; }
  uint64_t committed_records() const { return committed_records_; }
  const CheckpointMeter& meter() const { return meter_; }

 private:
  Status begin() {
    if (open_) return {};
    KPIPE_TRY(log_.begin_transaction());
    open_ = true;
    return {};
  }

  const ProduceOptions& options_;
  LogTransactions& log_;
  StateStore& store_;
  Io& io_;
  bool open_ = false;
  uint64_t records_open_ = 0;
  uint64_t committed_records_ = 0;
  uint64_t committed_ = 0;
  int64_t last_committed_ = 0;
  CheckpointMeter meter_;
};

class ProduceStage final : public LineStage {
 public:
  ProduceStage(const ProduceOptions& options, LogWriter& log, std::optional<FieldPath> key,
               BadInputHandler& bad, Transactions* transactions, const std::atomic<bool>* stop,
               PayloadWriter& payloads, HashPlacement* hashing, std::optional<FieldPath> hash_key)
      : options_(options),
        log_(log),
        hashing_(hashing),
        bad_(bad),
        transactions_(transactions),
        stop_(stop),
        keep_lines_(bad.mode() == OnError::kDlq),
        payloads_(payloads),
        envelope_(payloads.encodes_key() || payloads.encodes_value()) {
    if (key) {
      key_path_ = key->text();
      key_slot_ = fields_.add(*key);
    }
    if (hash_key) {
      hash_path_ = hash_key->text();
      hash_slot_ = fields_.add(*hash_key);
    }
    if (options_.partition) partition_ = static_cast<int32_t>(*options_.partition);
    log_.set_delivery_handler([this](uint64_t tag, const Error* err) { on_delivery(tag, err); });
  }

  Status on_line(const Line& line, Output&) override {
    // What the broker refused meanwhile is bad input first: under
    // --on-error fail, no line after the refusal is sent once it is known.
    KPIPE_TRY(settle());
    if (options_.envelope) return produce_envelope(line);
    KPIPE_TRY(encoder_.check(line.text));
    if (fields_.size() > 0) KPIPE_TRY(reader_.read(line.text, fields_, values_));
    std::optional<std::string_view> key;
    if (!key_path_.empty()) {
      const JsonField& k = values_[key_slot_];
      if (k.type == JsonType::kMissing) return data_error("field '{}' is missing", key_path_);
      key = record_key_bytes(k, key_text_);
      if (key && payloads_.encodes_key()) {
        auto encoded = payloads_.key(k.raw, std::nullopt);
        if (!encoded) return encoded.take_error();
        key = *encoded;
      }
    }
    std::optional<std::string_view> hash;
    if (!hash_path_.empty()) {
      auto h = hash_key();
      if (!h) return h.take_error();
      hash = *h;
    }
    std::string_view value = line.text;
    if (payloads_.encodes_value()) {
      auto encoded = payloads_.value(line.text, std::nullopt);
      if (!encoded) return encoded.take_error();
      value = *encoded;
    }
    return send(line, partition_, key, value, {}, 0, hash);
  }

  // --explicit-hash-key's value in the line just read: the digits of a
  // JSON string or of a number that is an integer, which the stream
  // checks are from 0 to 2^128-1. Anything else, or none, is the line's
  // fault (kpipe(7), BAD INPUT), as a missing key is.
  Expected<std::string_view> hash_key() {
    const JsonField& h = values_[hash_slot_];
    if (h.type == JsonType::kMissing) return data_error("field '{}' is missing", hash_path_);
    std::optional<std::string_view> digits;
    if (h.type == JsonType::kString) digits = h.str;
    if (h.type == JsonType::kNumber) digits = json_integer_digits(h.raw, hash_text_);
    auto hash = digits ? parse_explicit_hash_key(*digits)
                       : Expected<std::string>(
                             data_error("{} is not a decimal integer from 0 to 2^128-1",
                                        h.raw.size() > 48 ? std::string(h.raw.substr(0, 45)) + "..."
                                                          : std::string(h.raw)));
    if (!hash) return data_error("field '{}': {}", hash_path_, hash.error().message);
    hash_text_ = std::move(*hash);
    return std::string_view(hash_text_);
  }

  Status produce_envelope(const Line& line) {
    KPIPE_TRY(envelope_.read(line.text, record_));
    int32_t partition = partition_;
    if (options_.keep_partition) {
      if (!record_.partition) return data_error("field 'partition' is missing (--keep-partition)");
      if (*record_.partition < 0)
        return data_error("field 'partition' is negative ({})", *record_.partition);
      partition = *record_.partition;
    }
    // Timestamps come back exactly or not at all (kproduce(1), kpipe(7)).
    KPIPE_TRY(check_producible_timestamp(record_.timestamp));
    headers_.clear();
    for (const auto& h : record_.headers)
      headers_.push_back(
          {h.name, h.value ? std::optional<std::string_view>(*h.value) : std::nullopt});
    // The hash key's path is of the envelope line, as it was read.
    std::optional<std::string_view> hash;
    if (!hash_path_.empty()) {
      KPIPE_TRY(reader_.read(line.text, fields_, values_));
      auto h = hash_key();
      if (!h) return h.take_error();
      hash = *h;
    }
    std::optional<std::string_view> key, value;
    if (record_.key) key = *record_.key;
    if (record_.value) value = *record_.value;
    // Bytes (key_base64, value_base64) go as they are: a dead letter's
    // undecodable record is replayed unchanged (kpipe(7), SCHEMA REGISTRY).
    if (record_.key_json && !record_.key_is_bytes && payloads_.encodes_key()) {
      auto encoded = payloads_.key(*record_.key_json, record_.key_schema_id);
      if (!encoded) return encoded.take_error();
      key = *encoded;
    }
    if (record_.value_json && !record_.value_is_bytes && payloads_.encodes_value()) {
      auto encoded = payloads_.value(*record_.value_json, record_.value_schema_id);
      if (!encoded) return encoded.take_error();
      value = *encoded;
    }
    return send(line, partition, key, value, headers_, record_.timestamp.value_or(0), hash);
  }

  Status on_control(const Line& line, Output& out) override {
    if (transactions_ != nullptr) {
      auto cp = parse_checkpoint(line.text);
      if (!cp) return cp.take_error();
      if (*cp) {
        // A refusal read now is still this transaction's to report.
        log_.poll();
        KPIPE_TRY(settle());
        KPIPE_TRY(transactions_->on_checkpoint(**cp));
        KPIPE_TRY(settle());
      } else if (transactions_->records_open() > 0) {
        // Partitions revoked with no checkpoint before them were lost
        // (kpipe(7), MANY INSTANCES): their next owner reads the records
        // since the last checkpoint again, so this transaction's go.
        auto e = parse_partition_event(line.text);
        if (!e) return e.take_error();
        if (*e && (*e)->kind == PartitionEvent::Kind::kRevoked) {
          KPIPE_TRY(drain());
          KPIPE_TRY(settle());
          KPIPE_TRY(transactions_->abort_lost());
        }
      }
    }
    return LineStage::on_control(line, out);
  }

  Status on_idle(Output&) override {
    log_.poll();
    return settle();
  }

  Status on_end(Output&) override {
    KPIPE_TRY(drain());
    KPIPE_TRY(settle());
    return transactions_ != nullptr ? transactions_->finish() : Status();
  }

  void fill_counters(Counters& c) const override {
    c.out = log_.delivered();
    if (transactions_ != nullptr) transactions_->meter().fill(c);
  }

  // Waits until every record sent has its verdict (or a stop signal).
  Status drain() {
    for (;;) {
      Status flushed = log_.flush(kSecond);
      if (flushed.ok()) return {};
      if (stop_ != nullptr && stop_->load())
        return failure("stopped with records still undelivered: {}", flushed.error().message);
    }
  }

  // Applies --on-error to the records the broker refused since last time.
  Status settle() {
    while (next_refused_ < refused_.size()) {
      auto& [tag, reason] = refused_[next_refused_++];
      Status s = bad_.handle(in_flight_.input(tag), in_flight_.line(tag), reason);
      if (!s.ok() && bad_.failed()) {
        failed_tag_ = tag;
        uint64_t last = 0;
        delivered_after_ = in_flight_.delivered_after(tag, &last);
        if (delivered_after_ > 0) note_delivered_after(last);
      }
      in_flight_.settle(tag, false);
      if (!s.ok()) return s;
    }
    refused_.clear();
    next_refused_ = 0;
    return {};
  }

  uint64_t produced() const { return produced_; }
  // Records not delivered for reasons not their own (the broker out of
  // reach, a timeout), and the first reason.
  uint64_t lost() const { return lost_; }
  const std::string& first_lost() const { return first_lost_; }
  // After a refusal under --on-error fail: how many records read after the
  // refused one were delivered anyway, being in flight already, and the
  // last of them.
  uint64_t delivered_after_failure() const { return delivered_after_; }
  const std::string& last_delivered_input() const { return last_after_input_; }
  uint64_t last_delivered_line() const { return last_after_line_; }

 private:
  Status send(const Line& line, int32_t partition, std::optional<std::string_view> key,
              std::optional<std::string_view> value, const std::vector<Header>& headers,
              int64_t timestamp, std::optional<std::string_view> hash_key) {
    if (keep_lines_) KPIPE_TRY(wait_for_room(line.text.size()));
    if (transactions_ != nullptr) KPIPE_TRY(transactions_->before_record());
    uint64_t tag = in_flight_.next_tag();
    // A data_error here (too large, no such partition) is this line's:
    // run_filter applies --on-error to it.
    KPIPE_TRY(hash_key
                  ? hashing_->write_hashed(options_.topic, key, value, headers, *hash_key, tag)
                  : log_.write(options_.topic, partition, key, value, headers, timestamp, tag));
    if (transactions_ != nullptr) transactions_->sent();
    in_flight_.add(line, keep_lines_);
    ++produced_;
    // Verdicts are read as they come, so that a refusal stops the run
    // (under --on-error fail) as few lines later as it can.
    log_.poll();
    return settle();
  }

  // Bounds the lines kept for --on-error dlq: past the bound, waits for
  // deliveries to free some.
  Status wait_for_room(size_t bytes) {
    while (in_flight_.held() > 0 && in_flight_.held() + bytes > kMaxInFlightLineBytes) {
      if (stop_ != nullptr && stop_->load()) return {};
      log_.poll(100);
      KPIPE_TRY(settle());
    }
    return {};
  }

  // Runs inside the producer's polls and flushes.
  void on_delivery(uint64_t tag, const Error* err) {
    if (err != nullptr && err->status == ExitStatus::kDataError) {
      refused_.emplace_back(tag, err->message);
      return;
    }
    if (err != nullptr) {
      if (lost_++ == 0) first_lost_ = err->message;
    } else if (failed_tag_ && tag > *failed_tag_) {
      ++delivered_after_;
      if (tag >= last_after_tag_) note_delivered_after(tag);
    }
    in_flight_.settle(tag, err == nullptr);
  }

  void note_delivered_after(uint64_t tag) {
    last_after_tag_ = tag;
    last_after_input_ = in_flight_.input(tag);
    last_after_line_ = in_flight_.line(tag).number;
  }

  const ProduceOptions& options_;
  LogWriter& log_;
  HashPlacement* hashing_;  // a Kinesis writer's; null for Kafka
  BadInputHandler& bad_;
  Transactions* transactions_;  // null without --transactional
  const std::atomic<bool>* stop_;
  bool keep_lines_;
  int32_t partition_ = -1;
  std::string key_path_;
  size_t key_slot_ = 0;
  std::string hash_path_;
  size_t hash_slot_ = 0;
  std::string hash_text_;
  FieldSet fields_;
  JsonReader reader_;
  std::vector<JsonField> values_;
  PayloadEncoder encoder_;
  PayloadWriter& payloads_;
  EnvelopeReader envelope_;
  EnvelopeRecord record_;
  std::vector<Header> headers_;
  std::string key_text_;
  uint64_t produced_ = 0;
  InFlight in_flight_;
  std::vector<std::pair<uint64_t, std::string>> refused_;
  size_t next_refused_ = 0;
  uint64_t lost_ = 0;
  std::string first_lost_;
  std::optional<uint64_t> failed_tag_;
  uint64_t delivered_after_ = 0;
  uint64_t last_after_tag_ = 0;
  std::string last_after_input_;
  uint64_t last_after_line_ = 0;
};

// Whether kproduce --transactional ends an instance of a consumer group
// of pipelines, and which (kpipe(7), MANY INSTANCES): the instance line
// kconsume writes first says. kproduce fences the producer of the run
// before it, which kconsume waits for, so it looks at its first line only
// when that cannot wait on a fence: in a store a single pipeline used,
// whose kconsume may wait for an open transaction's offsets before its
// first line, it fences at once, as before instances.
Expected<std::optional<InstanceLine>> pipeline_instance(StateStore& store,
                                                        const ProduceOptions& options, Io& io) {
  auto kept = store.owned_by_group();
  if (!kept) return kept.take_error();
  if (!*kept) {
    auto next = store.next_checkpoint_id();
    if (!next) return next.take_error();
    if (*next > 1) return std::optional<InstanceLine>{};  // a single pipeline's
  }
  auto first = await_instance(options.input, io.stop);
  if (!first) return first.take_error();
  if (*kept && !*first && !(io.stop != nullptr && io.stop->load()))
    return failure(
        "state database '{}' keeps the state of a consumer group's instances: kproduce "
        "--transactional reads their kconsume's output, whose first line names the instance",
        display_target(options.state));
  return first;
}

}  // namespace

std::string default_transactional_id(std::string_view topic, std::string_view store) {
  return fmt::format("kpipe-{}-{:016x}", topic, XXH3_64bits(store.data(), store.size()));
}

namespace {
Status produce_to(const ProduceOptions& options, Io& io, OpenedWriter& opened,
                  const std::optional<FieldPath>& key, const std::optional<FieldPath>& hash_key,
                  StatsSettings stats, BadInputHandler& bad, PayloadWriter& payloads,
                  StateStore* store);
}  // namespace

Status run_produce(const ProduceOptions& given, Io& io) {
  if (given.topic.empty()) return usage_error("a topic is required: -t TOPIC");
  // -t kinesis:NAME: records go to the stream by their partition key.
  bool kinesis = is_kinesis_target(given.topic);
  if (!kinesis && !given.explicit_hash_key.empty())
    return usage_error(
        "--explicit-hash-key places records in a Kinesis stream's shards: a Kafka topic's "
        "records go by their key or -p (give -t kinesis:STREAM)");
  ProduceOptions kinesis_options;
  if (kinesis) {
    auto name = parse_kinesis_target(given.topic);
    if (!name) return name.take_error();
    kinesis_options = given;
    kinesis_options.topic = name->name;
    if (given.partition || given.keep_partition)
      return usage_error(
          "{}: a Kinesis record goes to the shard its partition key hashes to, not to a "
          "partition: drop {}",
          given.topic, given.partition ? "-p" : "--keep-partition");
    if (given.transactional)
      return usage_error(
          "--transactional: a Kinesis stream has no transactions; its records are written at "
          "least once");
  } else {
    KPIPE_TRY(check_topic_name(given.topic));
  }
  const ProduceOptions& options = kinesis ? kinesis_options : given;
  if (options.partition && (*options.partition < 0 || *options.partition > INT32_MAX))
    return usage_error("-p {}: a partition is a number from 0", *options.partition);
  if (options.keep_partition && !options.envelope)
    return usage_error("--keep-partition needs --envelope");
  if (options.keep_partition && options.partition)
    return usage_error("--keep-partition and --partition cannot be combined");
  if (options.envelope && !options.key.empty())
    return usage_error("--key cannot be combined with --envelope (the envelope holds the key)");
  if (options.transactional && options.state.empty())
    return usage_error(
        "--transactional needs --state STORE: the pipeline's checkpoints complete there");
  if (!options.transactional && (!options.state.empty() || !options.transactional_id.empty()))
    return usage_error("--state and --transactional-id go with --transactional");
  std::optional<FieldPath> key;
  if (!options.key.empty()) {
    auto parsed = FieldPath::parse(options.key);
    if (!parsed) return parsed.take_error();
    key = std::move(*parsed);
  }
  std::optional<FieldPath> hash_key;
  if (!options.explicit_hash_key.empty()) {
    auto parsed = FieldPath::parse(options.explicit_hash_key);
    if (!parsed) return parsed.take_error();
    hash_key = std::move(*parsed);
  }
  auto stats = parse_stats(options.stats, io.program);
  if (!stats) return stats.take_error();
  if (kinesis) {
    auto stream = KinesisLog::open(options.kinesis, given.topic, options.kafka.timeout, io.reporter,
                                   io.clock);
    if (!stream) return stream.take_error();
    auto bad =
        make_bad_input_handler(options.errors, io.program, io, options.kafka, &options.kinesis);
    if (!bad) return bad.take_error();
    auto payloads = PayloadWriter::open(options.schema, KafkaConfig{}, options.topic);
    if (!payloads) return payloads.take_error();
    auto writer = stream->writer();
    if (!writer) return writer.take_error();
    return produce_to(options, io, *writer, key, hash_key, std::move(*stats), **bad, **payloads,
                      nullptr);
  }
  auto log = KafkaLog::open(options.kafka, io.env_brokers, io.reporter, io.clock);
  if (!log) return log.take_error();
  const KafkaConfig& config = log->config();
  if (config.get("transactional.id") != nullptr)
    return usage_error("-X transactional.id: use --transactional (and --transactional-id ID)");
  auto bad = make_bad_input_handler(options.errors, io.program, io, &*log, &options.kinesis);
  if (!bad) return bad.take_error();
  auto payloads = PayloadWriter::open(options.schema, config, options.topic);
  if (!payloads) return payloads.take_error();
  std::unique_ptr<StateStore> store;
  std::string transactional_id;
  if (options.transactional) {
    auto opened = StateStore::open(options.state);
    if (!opened) return opened.take_error();
    // Another topic on the same state would complete the pipeline's
    // checkpoints with records in two topics, under another transactional
    // id that fences nothing the run before left open.
    KPIPE_TRY(keep_stage_options(**opened, kTransactionCompleter, {"--topic " + options.topic},
                                 "give another --state"));
    auto instance = pipeline_instance(**opened, options, io);
    if (!instance) return instance.take_error();
    if (io.stop != nullptr && io.stop->load()) return {};
    // One terminal stage completes a pipeline's checkpoints; in an
    // instance, one per instance.
    if (*instance) {
      KPIPE_TRY((*opened)->lock_stage_as_kept(kTransactionCompleter, (*instance)->pipeline));
    } else {
      KPIPE_TRY((*opened)->lock_stage(kTransactionCompleter));
    }
    store = std::move(*opened);
    std::string id = options.transactional_id;
    if (id.empty()) {
      std::string identity = display_target(options.state);
      if (char* real = ::realpath(options.state.c_str(), nullptr)) {
        identity = real;
        std::free(real);
      }
      id = default_transactional_id(options.topic, identity);
    }
    // Each instance's own, the same at each of its restarts, so that a
    // restart fences what its last run left open at once.
    if (*instance) id += "-" + (*instance)->name;
    io.reporter.info(fmt::format("transactional id '{}'", id));
    transactional_id = std::move(id);
  }
  auto writer = log->writer(transactional_id);
  if (!writer) return writer.take_error();
  return produce_to(options, io, *writer, key, std::nullopt, std::move(*stats), **bad, **payloads,
                    store.get());
}

namespace {

// Lines in, records out through an opened writer: Kafka's (with a
// transactional one's store) or Kinesis's.
Status produce_to(const ProduceOptions& options, Io& io, OpenedWriter& opened,
                  const std::optional<FieldPath>& key, const std::optional<FieldPath>& hash_key,
                  StatsSettings stats, BadInputHandler& bad, PayloadWriter& payloads,
                  StateStore* store) {
  OpenedWriter* writer = &opened;
  // The topic, before a line is read, and alike in both modes (kproduce(1),
  // THE TOPIC): one the broker creates is waited for, so that the first
  // records (or, under --transactional, the first commit) do not wait for
  // its leaders; one it does not create is said before a line is read, not
  // as records not acknowledged 30 seconds later
  // (topic.metadata.propagation.max.ms).
  auto parts = writer->log->await_partitions(options.topic);
  if (!parts) return parts.take_error();
  if (options.partition &&
      std::find(parts->begin(), parts->end(), *options.partition) == parts->end())
    return usage_error("topic '{}' has no partition {}", options.topic, *options.partition);
  std::optional<Transactions> transactions;
  if (store) {
    transactions.emplace(options, *writer->transactions, *store, io);
    KPIPE_TRY(transactions->start());
  }
  if (hash_key && writer->hashing == nullptr)
    return usage_error("--explicit-hash-key: '{}' places records by their key alone",
                       options.topic);
  ProduceStage stage(options, *writer->log, key, bad, transactions ? &*transactions : nullptr,
                     io.stop, payloads, writer->hashing, hash_key);
  FilterSettings settings{options.input, std::move(stats)};
  Status run = run_filter(stage, settings, bad, io);
  // Whatever happened, wait for what was queued: a record either reaches
  // the broker or is accounted for, never dropped unnoticed. (After a
  // normal end, on_end has done this already.)
  Status drained = stage.drain();
  // (A failed one: a fenced producer's abort fails too, and says nothing new.)
  if (!run.ok() && transactions) (void)transactions->abort_open();
  if (run.ok()) {
    run = stage.settle();
    if (run.ok()) run = bad.sync();
  }
  if (!run.ok() && stage.delivered_after_failure() > 0)
    io.reporter.warning(fmt::format(
        "{} record{} read after the refused one {} in flight already and "
        "delivered, up to {}: line {}",
        stage.delivered_after_failure(), stage.delivered_after_failure() == 1 ? "" : "s",
        stage.delivered_after_failure() == 1 ? "was" : "were", stage.last_delivered_input(),
        stage.last_delivered_line()));
  KPIPE_TRY(run);
  KPIPE_TRY(drained);
  if (stage.lost() > 0)
    // Not acknowledged is not unwritten: a record that timed out may be in
    // the topic (kproduce(1)).
    return failure("{} of {} records not acknowledged by '{}': {}", stage.lost(), stage.produced(),
                   options.topic, stage.first_lost());
  if (transactions) {
    io.reporter.info(fmt::format("committed {} transactions of {} records to '{}'",
                                 transactions->committed(), transactions->committed_records(),
                                 options.topic));
    return {};
  }
  io.reporter.info(fmt::format("produced {} records to '{}'", stage.produced(), options.topic));
  return {};
}

}  // namespace

}  // namespace kpipe
