// Private to kjoin (programs/kjoin*.cpp): the plan its command line
// compiles to, and the face its table sources share. The driver and the
// stream's side are in kjoin.cpp; each kind of table is a file of its own:
// a file of NDJSON rows (kjoin_table_file.cpp), a topic
// (kjoin_table_topic.cpp), a database table (kjoin_table_db.cpp). Nothing
// outside programs/kjoin*.cpp includes this file but their tests.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kpipe/event_time.h"
#include "kpipe/join.h"
#include "kpipe/json.h"
#include "kpipe/line.h"
#include "kpipe/log.h"
#include "kpipe/programs/kjoin.h"
#include "kpipe/stage/bad_input.h"
#include "kpipe/stage/stateful.h"
#include "kpipe/target.h"
#include "kpipe/time.h"

namespace kpipe {
class KafkaLog;
}

namespace kpipe::kjoin_internal {

enum class OnMiss { kKeep, kDrop, kDlq };

struct JoinPlan;
class TableSource;

// What a kind of table decides of the command line, and how it is opened:
// chosen once from --table (make_plan), so that nothing else asks which
// kind it is.
struct TableKind {
  // --table-key and --table-time name the row's columns, not paths.
  bool columns = false;
  // Keyed by each record's key, so --table-key is refused, and --as-of
  // needs no --table-time (a topic's).
  bool keyed_by_record = false;
  // Read again every --refresh.
  bool refreshed = false;
  Expected<std::unique_ptr<TableSource>> (*open)(const JoinPlan& plan, const JoinOptions& options,
                                                 Io& io) = nullptr;
};

extern const TableKind kFileTable;    // kjoin_table_file.cpp
extern const TableKind kTopicTable;   // kjoin_table_topic.cpp
extern const TableKind kStreamTable;  // kjoin_table_topic.cpp: a Kinesis stream
extern const TableKind kDbTable;      // kjoin_table_db.cpp

// What the command line says, checked and compiled once.
struct JoinPlan {
  Target table;
  const TableKind* kind = nullptr;
  JoinMode mode = JoinMode::kLookup;
  OnMiss on_miss = OnMiss::kKeep;
  TimeUnit time_unit = TimeUnit::kMillis;
  Millis table_disorder = 0;
  Millis idle_timeout = 0;
  Millis stream_disorder = 0;
  Millis refresh = 0;  // 0: never
  std::string stage;

  // The stream's paths.
  FieldSet fields;
  std::vector<size_t> key_slots;
  size_t as_slot = 0;
  std::optional<size_t> parent_slot;  // the --as path's object, unless it is the line
  std::string as_name;                // the member --as sets
  std::string parent_name;            // the parent's path, for messages
  std::optional<size_t> time_slot;    // --as-of
  // --as-of with --state: the envelope's partition, by which an instance
  // of a consumer group keeps the records waiting (kpipe(7), MANY
  // INSTANCES).
  std::optional<size_t> topic_slot;
  std::optional<size_t> partition_slot;

  // The table's paths (FILE and SQL rows, Kafka envelopes for --table-time).
  FieldSet table_fields;
  std::vector<size_t> table_key_slots;
  std::optional<size_t> table_time_slot;
};

// Reads table rows (a file's lines, a database's rows, Kafka envelopes):
// their key and time, with one reused parser.
class RowReader {
 public:
  explicit RowReader(const JoinPlan& plan) : plan_(plan) {}

  struct Row {
    std::optional<std::string_view> key;  // nullopt: a null key
    Millis time = 0;
  };

  // `text` must be padded (a Line's, or after pad()).
  Expected<Row> read(std::string_view text, bool keyed_by_fields) {
    KPIPE_TRY(reader_.read(text, plan_.table_fields, values_));
    return from_values(values_.data(), keyed_by_fields);
  }

  // The same from values read already (a LineFeed's).
  Expected<Row> from_values(const JsonField* values, bool keyed_by_fields) {
    Row row;
    if (keyed_by_fields) {
      auto key = join_key(plan_.table_fields, plan_.table_key_slots, values, key_);
      if (!key) return key.take_error();
      row.key = *key;
    }
    if (plan_.table_time_slot) {
      size_t slot = *plan_.table_time_slot;
      auto t = read_event_time(values[slot], plan_.table_fields.path(slot).text(), plan_.time_unit);
      if (!t) return t.take_error();
      row.time = *t;
    }
    return row;
  }

  std::string_view pad(std::string_view text) {
    padded_.assign(text, 0, {});
    return padded_.text();
  }

  Status validate(std::string_view padded) { return validator_.check(padded); }

 private:
  const JoinPlan& plan_;
  JsonReader reader_;
  JsonValidator validator_;
  std::vector<JsonField> values_;
  std::string key_;
  HeldLine padded_;
};

// The keys a table read whole has more than once (or, as of, a key and
// time): such a table does not say which row is the key's (an SQL table's
// rows come in no order), so kjoin refuses it rather than join one of them
// (kjoin(1), Tables).
class Duplicates {
 public:
  void add(std::string_view key, Millis time, uint64_t where) {
    auto [it, fresh] = rows_.try_emplace(std::string(key), 1);
    ++it->second;
    if (!fresh || first_where_ != 0) return;
    first_key_ = key;
    first_time_ = time;
    first_where_ = where;
  }
  bool empty() const { return rows_.empty(); }
  // "key 7 is in 3 rows (again at line 9), and 2 other keys in more than
  // one"; `unit` names a row's place ("line", "row").
  std::string describe(JoinMode mode, std::string_view unit) const {
    std::string what = mode == JoinMode::kAsOf ? fmt::format("key {} at time {}", first_key_,
                                                             format_rfc3339(first_time_))
                                               : fmt::format("key {}", first_key_);
    std::string others;
    if (rows_.size() > 1)
      others = fmt::format(", and {} other {} in more than one", rows_.size() - 1,
                           rows_.size() == 2 ? "key is" : "keys are");
    return fmt::format("{} is in {} rows (again at {} {}){}: a table has one row per key{}", what,
                       rows_.at(first_key_), unit, first_where_, others,
                       mode == JoinMode::kAsOf ? " and time (--table-time)" : "");
  }

 private:
  std::unordered_map<std::string, uint64_t> rows_;  // key: its rows, for keys in more than one
  std::string first_key_;
  Millis first_time_ = 0;
  uint64_t first_where_ = 0;
};

// Rows put into a table read whole a batch at a time: each row's index
// slot is prefetched as it is read and the batch put once full, so that the
// cache misses of a large table overlap instead of coming one by one.
class RowBatch {
 public:
  RowBatch(JoinEngine& engine, Duplicates& duplicates) : engine_(engine), duplicates_(duplicates) {}
  ~RowBatch() { flush(); }

  // `where`: the row's line or row number, for messages.
  void add(std::string_view key, Millis time, std::string_view row, uint64_t where) {
    Item& item = items_[count_++];
    item.key.assign(key);
    item.row.assign(row);
    item.time = time;
    item.where = where;
    engine_.lookup_table().prefetch_slot(LookupTable::hash(key));
    if (count_ == kSize) flush();
  }

  void flush() {
    for (size_t i = 0; i < count_; ++i) {
      const Item& item = items_[i];
      if (engine_.apply(item.key, item.time, item.row, -1, 0))
        duplicates_.add(item.key, item.time, item.where);
    }
    count_ = 0;
  }

 private:
  static constexpr size_t kSize = 16;
  struct Item {
    std::string key;
    std::string row;
    Millis time = 0;
    uint64_t where = 0;
  };
  JoinEngine& engine_;
  Duplicates& duplicates_;
  std::array<Item, kSize> items_;
  size_t count_ = 0;
};

// Where the table comes from. load() reads it whole (a topic: to its
// end); poll() takes what changed since, without waiting longer than
// `wait`.
class TableSource {
 public:
  virtual ~TableSource() = default;
  // The Kafka log the table is read from, whose settings a --dlq
  // kafka:TOPIC shares; none for a table outside Kafka.
  virtual const KafkaLog* kafka_log() const { return nullptr; }
  // Whether the engine keeps the rows with the state: a topic's are read
  // on from the offsets saved with them; a table read whole is read again.
  virtual bool rows_saved() const { return false; }
  virtual Status load(JoinEngine& engine) = 0;
  virtual Status poll(JoinEngine& engine, Millis wait) = 0;
  // Reads a topic to its present end (at the end of input); nothing for
  // a table read whole.
  virtual Status catch_up(JoinEngine& engine) {
    (void)engine;
    return {};
  }
  // At exit, after the stream's end or an error.
  virtual void at_exit(Reporter& reporter) const { (void)reporter; }
  uint64_t skipped() const { return skipped_; }
  // What --on-error says of bad table rows (kjoin(1), Tables).
  void set_on_error(OnError mode) { on_error_ = mode; }

 protected:
  // A bad row of the table (not JSON, its key null or missing, its time
  // not a time): bad input as kpipe(7) says, the table and the row named.
  // Under --on-error fail an error; else the row is left out and counted,
  // and end_read() warns of it: a table row is not dead-lettered, since it
  // is fixed where it lives, not replayed.
  Status bad_row(std::string message) {
    if (on_error_ == OnError::kFail) return data_error("{}", message);
    ++skipped_;
    if (left_out_++ == 0) first_bad_ = std::move(message);
    return {};
  }
  void begin_read() {
    left_out_ = 0;
    first_bad_.clear();
  }
  // After a table read whole: one warning for the rows left out, unless the
  // read before said the same (a table --refresh reads again each time).
  void end_read(Reporter& reporter) {
    if (left_out_ == 0) {
      last_warning_.clear();
      return;
    }
    std::string warning = fmt::format(
        "left out {} bad table {} ({}), the first: {}", left_out_, left_out_ == 1 ? "row" : "rows",
        on_error_ == OnError::kSkip ? "--on-error skip" : "--on-error dlq", first_bad_);
    if (warning != last_warning_) reporter.warning(warning);
    last_warning_ = std::move(warning);
  }

  uint64_t skipped_ = 0;
  OnError on_error_ = OnError::kFail;
  uint64_t left_out_ = 0;  // in the current read
  std::string first_bad_;
  std::string last_warning_;
};

// Opens the reader a topic's table is read through, when it is loaded.
using LogOpener = std::function<Expected<std::unique_ptr<LogReader>>()>;
// A log's partitions read as a table (kjoin_table_topic.cpp): `where`
// names the log in errors; `kafka`, the Kafka log whose settings a --dlq
// kafka:TOPIC shares (none for a log outside Kafka).
std::unique_ptr<TableSource> make_topic_table(const JoinPlan& plan, LogOpener open,
                                              std::string where, const KafkaLog* kafka, Io& io);

}  // namespace kpipe::kjoin_internal
