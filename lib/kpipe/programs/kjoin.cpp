#include "kpipe/programs/kjoin.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <unordered_map>

#include "kpipe/control.h"
#include "kpipe/envelope.h"
#include "kpipe/event_time.h"
#include "kpipe/join.h"
#include "kpipe/json.h"
#include "kpipe/kafka/client.h"
#include "kpipe/kafka/topic.h"
#include "kpipe/programs/dlq_targets.h"
#include "kpipe/programs/stage_state.h"
#include "kpipe/stage/bad_input.h"
#include "kpipe/stage/line_feed.h"
#include "kpipe/stage/stateful.h"
#include "kpipe/store/sql.h"
#include "kpipe/store/table_rows.h"
#include "kpipe/target.h"

namespace kpipe {

namespace {

constexpr const char* kStateFormat = "kjoin/1";
// How often the stream's loop looks at the table between records.
constexpr Millis kPollEvery = 100;
constexpr Millis kFileCheckEvery = 1000;
// Stream records waiting for the table's watermark, at most: beyond
// this, kjoin stops reading the stream and waits for the table.
constexpr size_t kMaxPending = 100'000;
constexpr size_t kMaxPendingBytes = size_t{64} << 20;

enum class OnMiss { kKeep, kDrop, kDlq };

// A table kept in a database (sqlite:FILE:TABLE or postgresql://...#TABLE),
// read with SQL, rather than a file of NDJSON rows or a Kafka topic.
bool is_sql(const Target& table) {
  return table.kind == TargetKind::kSqlite || table.kind == TargetKind::kPostgres;
}

// --table as it may be shown: a PostgreSQL target without its password
// (kpipe(7), STORES), its #TABLE kept.
std::string shown_table(const std::string& text) {
  size_t hash = text.rfind('#');
  if (hash == std::string::npos) return display_target(text);
  return display_target(text.substr(0, hash)) + text.substr(hash);
}

// What decides the meaning of a saved state: the table, its key and the
// join's mode. A state saved for another table would restore rows that
// are not this table's. The table is kept as shown: the saved options are
// printed when they differ, and a new password is the same table.
std::vector<std::string> state_options(const JoinOptions& o) {
  std::vector<std::string> options{"--table " + shown_table(o.table)};
  std::string keys;
  for (const std::string& k : o.table_keys)
    keys += (keys.empty() ? "--table-key " : " --table-key ") + k;
  options.push_back(keys.empty() ? "no --table-key" : keys);
  if (o.as_of.empty()) {
    options.emplace_back("no --as-of");
  } else {
    options.push_back("--as-of with --table-time " +
                      (o.table_time.empty() ? ".timestamp" : o.table_time) + " --time-unit " +
                      o.time_unit);
  }
  return options;
}

// What the command line says, checked and compiled once.
struct JoinPlan {
  Target table;
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

Expected<FieldPath> parse_path(std::string_view option, const std::string& text) {
  auto path = FieldPath::parse(text);
  if (!path) return usage_error("{}: {}", option, path.error().message);
  return std::move(*path);
}

// A column name as the path of a member of the row's object.
Expected<FieldPath> column_path(std::string_view option, const std::string& column) {
  if (column.empty()) return usage_error("{}: a column name is empty", option);
  std::string quoted = ".";
  append_json_string(quoted, column);
  auto path = FieldPath::parse(quoted);
  if (!path) return usage_error("{} '{}': {}", option, column, path.error().message);
  return std::move(*path);
}

Expected<JoinPlan> make_plan(const JoinOptions& o, const std::string& program) {
  JoinPlan plan;
  plan.stage = stage_name(program, o.name);
  auto table = parse_table_target(o.table, display_target(o.table));
  if (!table) return table.take_error();
  plan.table = std::move(*table);
  if (o.keys.empty()) return usage_error("--key is required: the stream's side of the join");
  if (o.as.empty()) return usage_error("--as is required: where the row goes");
  for (const std::string& text : o.keys) {
    auto path = parse_path("--key", text);
    if (!path) return path.take_error();
    plan.key_slots.push_back(plan.fields.add(*path));
  }
  auto as = parse_path("--as", o.as);
  if (!as) return as.take_error();
  if (as->steps().empty() || !as->steps().back().has_key || as->steps().back().has_index)
    return usage_error("--as {}: the path must end in an object's member (.value.user)", o.as);
  plan.as_name = as->steps().back().key;
  plan.as_slot = plan.fields.add(*as);
  if (as->steps().size() > 1) {
    // The parent's path: the text up to the last step, as a JSON Pointer.
    std::string parent;
    for (size_t i = 0; i + 1 < as->steps().size(); ++i) {
      const PathStep& s = as->steps()[i];
      parent.push_back('/');
      std::string step = s.has_key ? s.key : std::to_string(s.index);
      for (char c : step) {
        if (c == '~')
          parent += "~0";
        else if (c == '/')
          parent += "~1";
        else
          parent.push_back(c);
      }
    }
    auto p = FieldPath::parse(parent);
    if (!p) return usage_error("--as: {}", p.error().message);
    plan.parent_slot = plan.fields.add(*p);
    // Messages name the parent as the user wrote it, where that is plain.
    plan.parent_name = parent;
    for (std::string_view sep : {".", "/"}) {
      std::string tail = std::string(sep) + plan.as_name;
      if (o.as.size() > tail.size() &&
          o.as.compare(o.as.size() - tail.size(), tail.size(), tail) == 0)
        plan.parent_name = o.as.substr(0, o.as.size() - tail.size());
    }
  }

  if (o.on_miss == "keep") {
    plan.on_miss = OnMiss::kKeep;
  } else if (o.on_miss == "drop") {
    plan.on_miss = OnMiss::kDrop;
  } else if (o.on_miss == "dlq") {
    plan.on_miss = OnMiss::kDlq;
    if (o.errors.dlq.empty())
      return usage_error("--on-miss dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  } else {
    return usage_error("--on-miss must be keep, drop or dlq, not '{}'", o.on_miss);
  }
  auto unit = parse_time_unit(o.time_unit);
  if (!unit) return usage_error("--time-unit: {}", unit.error().message);
  plan.time_unit = *unit;
  auto duration = [](std::string_view option, const std::string& text, Millis& out) -> Status {
    if (text.empty()) return {};
    auto d = parse_duration(text);
    if (!d) return usage_error("{}: {}", option, d.error().message);
    out = *d;
    return {};
  };
  KPIPE_TRY(duration("--table-watermark", o.table_watermark, plan.table_disorder));
  KPIPE_TRY(duration("--idle-timeout", o.idle_timeout, plan.idle_timeout));
  KPIPE_TRY(duration("--watermark", o.watermark, plan.stream_disorder));
  KPIPE_TRY(duration("--refresh", o.refresh, plan.refresh));
  if (!o.idle_timeout.empty() && plan.idle_timeout <= 0)
    return usage_error("--idle-timeout must be more than 0");
  if (!o.refresh.empty() && plan.refresh <= 0) return usage_error("--refresh must be more than 0");
  if (!o.refresh.empty() && !is_sql(plan.table))
    return usage_error(
        "--refresh is for sqlite: and postgresql: tables (a file is read again when replaced, a "
        "topic followed)");

  // The table's side.
  TargetKind kind = plan.table.kind;
  bool sql = is_sql(plan.table);
  if (kind == TargetKind::kKafka && !o.table_keys.empty())
    return usage_error(
        "--table-key is not for kafka: tables: a topic's table is keyed by the record key");
  if (kind != TargetKind::kKafka && o.table_keys.empty())
    return usage_error("--table {} needs --table-key {}", shown_table(o.table),
                       sql ? "COLUMN" : "PATH");
  if (kind != TargetKind::kKafka && o.table_keys.size() != o.keys.size())
    return usage_error("--table-key and --key must name as many fields ({} and {})",
                       o.table_keys.size(), o.keys.size());
  for (const std::string& text : o.table_keys) {
    auto path = sql ? column_path("--table-key", text) : parse_path("--table-key", text);
    if (!path) return path.take_error();
    plan.table_key_slots.push_back(plan.table_fields.add(*path));
  }
  if (!o.as_of.empty()) {
    plan.mode = JoinMode::kAsOf;
    auto path = parse_path("--as-of", o.as_of);
    if (!path) return path.take_error();
    plan.time_slot = plan.fields.add(*path);
    if (!o.state.empty()) {
      plan.topic_slot = plan.fields.add(*FieldPath::parse(".topic"));
      plan.partition_slot = plan.fields.add(*FieldPath::parse(".partition"));
    }
    if (kind != TargetKind::kKafka && o.table_time.empty())
      return usage_error("--as-of with --table {} needs --table-time: the time of each row",
                         shown_table(o.table));
  } else if (!o.table_time.empty()) {
    return usage_error("--table-time is for --as-of joins");
  }
  if (!o.table_time.empty()) {
    auto path =
        sql ? column_path("--table-time", o.table_time) : parse_path("--table-time", o.table_time);
    if (!path) return path.take_error();
    plan.table_time_slot = plan.table_fields.add(*path);
  }
  return plan;
}

// The line without the blanks around its value.
std::string_view trim(std::string_view text) {
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(start, end - start + 1);
}

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
  virtual Status load(JoinEngine& engine) = 0;
  virtual Status poll(JoinEngine& engine, Millis wait) = 0;
  // Reads a topic to its present end (at the end of input); nothing for
  // a table read whole.
  virtual Status catch_up(JoinEngine& engine) {
    (void)engine;
    return {};
  }
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

// A file of NDJSON rows, read again when replaced.
class FileTable final : public TableSource {
 public:
  FileTable(const JoinPlan& plan, const JoinOptions& options, Io& io)
      : plan_(plan), path_(plan.table.location), max_line_(options.input.max_line_bytes), io_(io) {}

  Status load(JoinEngine& engine) override {
    engine.set_whole(true);
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0 && errno == ENOENT)
      return usage_error("--table: there is no file '{}'", path_);
    KPIPE_TRY(identify(identity_));
    auto read = read_into(engine);
    if (!read.ok()) return read;
    last_check_ = io_.clock.steady();
    return {};
  }

  Status poll(JoinEngine& engine, Millis) override {
    Millis now = io_.clock.steady();
    if (now - last_check_ < kFileCheckEvery) return {};
    last_check_ = now;
    Identity current;
    Status there = identify(current);
    if (!there.ok()) {
      // Gone for a moment (a rename in two steps), or for good: the table
      // read before stays, and the operator hears of it once.
      if (!warned_)
        io_.reporter.warning(fmt::format("kept the table read before: {}", there.error().message));
      warned_ = true;
      return {};
    }
    // A version refused once is not read again until it changes.
    if (current == identity_ || (refused_ && current == *refused_)) return {};
    JoinEngine fresh(engine.mode(), false, 0, 0, io_.clock);
    Status read = read_into(fresh);
    if (!read.ok()) {
      io_.reporter.warning(fmt::format("kept the table read before: {}", read.error().message));
      refused_ = current;
      return {};
    }
    identity_ = current;
    refused_.reset();
    warned_ = false;
    engine.replace_table(fresh);
    io_.reporter.info(fmt::format("read '{}' again: {} rows", path_, engine.rows()));
    return {};
  }

 private:
  struct Identity {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const Identity&) const = default;
  };

  Status identify(Identity& out) const {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0)
      return failure("cannot read the table '{}': {}", path_, std::strerror(errno));
    out = Identity{st.st_dev, st.st_ino, st.st_size,
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
    return {};
  }

  Status read_into(JoinEngine& engine) {
    LineFeed feed({path_}, max_line_, &plan_.table_fields);
    RowReader rows(plan_);
    constexpr uint64_t kSizeAfter = 4096;
    uint64_t rows_read = 0;
    Duplicates duplicates;
    RowBatch batch(engine, duplicates);
    begin_read();
    uint64_t line_bytes = 0;
    Line line;
    const ParsedLine* parsed = nullptr;
    while (true) {
      auto more = feed.next(line, parsed);
      if (!more) return more.take_error();
      if (!*more) break;
      if (is_blank_line(line.text)) continue;
      auto bad = [&](std::string_view why) {
        return bad_row(fmt::format("table {}: line {}: {}", path_, line.number, why));
      };
      if (line.too_long) {
        KPIPE_TRY(bad(fmt::format("longer than {} bytes", max_line_)));
        continue;
      }
      Status valid = rows.validate(line.text);
      if (!valid.ok()) {
        KPIPE_TRY(bad(valid.error().message));
        continue;
      }
      if (parsed != nullptr && !parsed->status.ok()) {
        KPIPE_TRY(bad(parsed->status.error().message));
        continue;
      }
      auto row =
          parsed != nullptr ? rows.from_values(parsed->values, true) : rows.read(line.text, true);
      if (!row) {
        KPIPE_TRY(bad(row.error().message));
        continue;
      }
      // A large table's index is sized once, from the first rows' length.
      line_bytes += line.text.size() + 1;
      if (++rows_read == kSizeAfter && engine.mode() == JoinMode::kLookup)
        engine.reserve(static_cast<size_t>(static_cast<double>(identity_.size) /
                                           static_cast<double>(line_bytes) * kSizeAfter * 1.05));
      if (!row->key) {
        KPIPE_TRY(bad(fmt::format("field '{}' is null",
                                  plan_.table_fields.path(plan_.table_key_slots[0]).text())));
        continue;
      }
      batch.add(*row->key, row->time, line.text, line.number);
    }
    batch.flush();
    if (!duplicates.empty())
      return data_error("table {}: {}", path_, duplicates.describe(engine.mode(), "line"));
    end_read(io_.reporter);
    return {};
  }

  const JoinPlan& plan_;
  std::string path_;
  size_t max_line_;
  Io& io_;
  Identity identity_;
  std::optional<Identity> refused_;  // a new version that was bad
  Millis last_check_ = 0;
  bool warned_ = false;
};

// A database table, read again every --refresh.
class SqlTable final : public TableSource {
 public:
  SqlTable(const JoinPlan& plan, const JoinOptions& options, Io& io)
      : plan_(plan), options_(options), io_(io) {}

  Status load(JoinEngine& engine) override {
    engine.set_whole(true);
    KPIPE_TRY(read_into(engine));
    last_read_ = io_.clock.steady();
    return {};
  }

  Status poll(JoinEngine& engine, Millis) override {
    if (plan_.refresh <= 0) return {};
    Millis now = io_.clock.steady();
    if (now - last_read_ < plan_.refresh) return {};
    last_read_ = now;
    JoinEngine fresh(engine.mode(), false, 0, 0, io_.clock);
    Status read = read_into(fresh);
    if (!read.ok()) {
      io_.reporter.warning(fmt::format("kept the table read before: {}", read.error().message));
      return {};
    }
    engine.replace_table(fresh);
    return {};
  }

 private:
  // The columns --table-key and --table-time name are the table's: a
  // misspelt one is a usage error, not bad data in every row (and is one
  // in a table with no rows yet).
  Status check_columns(const std::vector<std::string>& columns) {
    std::string names;
    for (const std::string& c : columns) names += (names.empty() ? "" : ", ") + c;
    auto check = [&](std::string_view option, const std::string& column) -> Status {
      for (const std::string& c : columns)
        if (c == column) return {};
      return usage_error("{} {}: table {} has no such column (it has {})", option, column,
                         plan_.table.table, names);
    };
    for (const std::string& c : options_.table_keys) KPIPE_TRY(check("--table-key", c));
    if (!options_.table_time.empty()) KPIPE_TRY(check("--table-time", options_.table_time));
    return {};
  }

  Status read_into(JoinEngine& engine) {
    RowReader rows(plan_);
    Duplicates duplicates;
    RowBatch batch(engine, duplicates);
    begin_read();
    uint64_t n = 0;
    std::string name =
        fmt::format("table {} of {}", plan_.table.table, display_target(plan_.table.location));
    Status read = read_table_rows(
        plan_.table.location, plan_.table.table,
        [&](const std::vector<std::string>& columns) { return check_columns(columns); },
        [&](std::string_view text) -> Status {
          ++n;
          std::string_view padded = rows.pad(text);
          auto row = rows.read(padded, true);
          if (!row) return bad_row(fmt::format("{}: row {}: {}", name, n, row.error().message));
          if (!row->key)
            return bad_row(
                fmt::format("{}: row {}: column '{}' is null", name, n, options_.table_keys[0]));
          batch.add(*row->key, row->time, text, n);
          return {};
        });
    batch.flush();
    if (!read.ok()) return read;
    if (!duplicates.empty())
      return data_error("{}: {}", name, duplicates.describe(engine.mode(), "row"));
    end_read(io_.reporter);
    return {};
  }

  const JoinPlan& plan_;
  const JoinOptions& options_;
  Io& io_;
  Millis last_read_ = 0;
};

// A topic read as a table: each record's key is the table's key, the
// newest value wins, a tombstone deletes (kjoin(1), TABLES).
class KafkaTable final : public TableSource {
 public:
  KafkaTable(const JoinPlan& plan, std::unique_ptr<Consumer> consumer, Io& io)
      : plan_(plan), consumer_(std::move(consumer)), io_(io), rows_(plan) {}

  Status load(JoinEngine& engine) override {
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
  // the count at exit (run_join).
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

class JoinStage final : public ParsingStage {
 public:
  JoinStage(const JoinPlan& plan, JoinEngine& engine, TableSource& table, BadInputHandler& bad,
            StageState& state, Io& io)
      : plan_(plan), engine_(engine), table_(table), bad_(bad), state_(state), io_(io) {
    last_poll_ = io.clock.steady();
    append_json_string(member_, plan.as_name);
    member_.push_back(':');
  }

  const FieldSet* fields() const override { return &plan_.fields; }

  Status on_parsed(const Line& line, const ParsedLine& parsed, Output& out) override {
    Status read = read_record(parsed);
    if (!read.ok()) {
      KPIPE_TRY(settle(out));
      return read;
    }
    if ((++since_poll_ & 255) == 0) KPIPE_TRY(poll_now(out));
    const JsonField* values = parsed.values;
    auto key = join_key(plan_.fields, plan_.key_slots, values, key_);
    if (!key) {
      KPIPE_TRY(settle(out));
      return key.take_error();
    }
    if (plan_.mode == JoinMode::kLookup) return look_up(line, values, *key, out);
    size_t slot = *plan_.time_slot;
    auto time = read_event_time(values[slot], plan_.fields.path(slot).text(), plan_.time_unit);
    if (!time) return time.take_error();
    stream_newest_ = std::max(stream_newest_, *time);
    if (state_.sliced()) {
      KPIPE_TRY(hold_in_slice(line, values, *key, *time, out));
    } else {
      if (!engine_.has_pending() && engine_.table_passed(*time))
        return emit_as_of(line, values, *key, *time, out);
      engine_.hold(*time, line.number, line.input, line.text);
    }
    KPIPE_TRY(release(out));
    // The table is behind: read it, not the stream, until it catches up.
    while (waiting() > kMaxPending || waiting_bytes() > kMaxPendingBytes) {
      if (stopping()) break;
      KPIPE_TRY(out.flush());
      KPIPE_TRY(table_.poll(engine_, kPollEvery));
      KPIPE_TRY(release(out));
    }
    return {};
  }

  // A control line does not overtake the records waiting before it
  // (kpipe(7), CONTROL LINES AND CHECKPOINTS): it waits behind them.
  // With --state a checkpoint line is the exception: the records waiting
  // are in the snapshot it saves, so it may go on at once.
  Status on_control(const Line& line, Output& out) override {
    KPIPE_TRY(settle(out));
    KPIPE_TRY(release(out));
    if (state_.sliced()) return control_in_instance(line, out);
    if (engine_.has_pending()) {
      bool checkpoint = false;
      if (state_.enabled()) {
        auto parsed = parse_checkpoint(line.text);
        checkpoint = parsed && parsed->has_value();
      }
      if (!checkpoint) {
        engine_.hold(kMinTime, line.number, line.input, line.text);
        return {};
      }
    }
    KPIPE_TRY(state_.on_control(line));
    // The first partitions line with epochs makes the stage an instance's:
    // its table is read whole by every instance, and saved by none
    // (kpipe(7), MANY INSTANCES).
    if (state_.sliced()) engine_.set_tracking(false);
    out.write_line(line.text);
    return {};
  }

  Status before_wait(Output& out) override {
    KPIPE_TRY(settle(out));
    KPIPE_TRY(table_.poll(engine_, 0));
    return release(out);
  }

  Status on_idle(Output& out) override {
    KPIPE_TRY(table_.poll(engine_, 0));
    return release(out);
  }

  Millis idle_interval() const override { return kPollEvery; }

  // Waits for the table no longer than --idle-timeout lets a quiet one
  // hold records; without it, joins what waits with the table as it is.
  Status on_end(Output& out) override {
    KPIPE_TRY(settle(out));
    if (plan_.mode != JoinMode::kAsOf || !has_waiting()) return {};
    KPIPE_TRY(table_.catch_up(engine_));
    KPIPE_TRY(release(out));
    if (plan_.idle_timeout > 0) {
      while (has_waiting() && !stopping()) {
        KPIPE_TRY(out.flush());
        KPIPE_TRY(table_.poll(engine_, kPollEvery));
        KPIPE_TRY(release(out));
      }
    }
    // Stopped with --state, the records waiting are read again from the
    // last checkpoint by the next run; without, they are written now.
    if (stopping() && state_.enabled()) return {};
    return release(out, true);
  }

  void fill_counters(Counters& c) const override {
    c.out = joined_ + missed_ - dead_lettered_;
    c.dropped = dropped_;
    c.state_size = engine_.rows();
    state_.meter.fill(c);
  }

  uint64_t joined() const { return joined_; }
  uint64_t missed() const { return missed_; }
  uint64_t dropped() const { return dropped_; }
  uint64_t dead_lettered() const { return dead_lettered_; }

  // Records waiting for the table: a single pipeline's, or those of an
  // instance's partitions.
  size_t waiting() const {
    size_t n = engine_.pending();
    state_.for_each_slice([&](const TopicPartition&, Snapshottable& q) {
      n += static_cast<PendingQueue&>(q).size();
    });
    return n;
  }

 private:
  size_t waiting_bytes() const {
    size_t n = engine_.pending_bytes();
    state_.for_each_slice([&](const TopicPartition&, Snapshottable& q) {
      n += static_cast<PendingQueue&>(q).bytes();
    });
    return n;
  }

  bool has_waiting() const { return !controls_.empty() || waiting() > 0; }

  // An instance's record waits in its source partition's queue, which is
  // saved with the partition's state and moves with it (kpipe(7), MANY
  // INSTANCES); it is joined at once only when nothing that came before
  // it in its partition, and no control line, waits.
  Status hold_in_slice(const Line& line, const JsonField* values,
                       std::optional<std::string_view> key, Millis time, Output& out) {
    auto found = state_.engine_of(values[*plan_.topic_slot], values[*plan_.partition_slot],
                                  "records waiting for the table");
    if (!found) return found.take_error();
    auto& queue = static_cast<PendingQueue&>(**found);
    if (queue.empty() && controls_.empty() && engine_.table_passed(time))
      return emit_as_of(line, values, key, time, out);
    queue.hold(time, line.number, line.input, line.text, ++arrivals_);
    return {};
  }

  // In an instance, checkpoint and partitions lines go on at once: the
  // records waiting are in the slices the checkpoint saves, and those of
  // a revoked partition go with its slice to its next owner, which joins
  // them (kpipe(7), MANY INSTANCES). Another control line waits behind the
  // records that came before it.
  Status control_in_instance(const Line& line, Output& out) {
    bool now = controls_.empty() && waiting() == 0;
    if (!now) {
      auto checkpoint = parse_checkpoint(line.text);
      auto event = parse_partition_event(line.text);
      // A malformed one is refused by state_ below.
      now = !checkpoint || checkpoint->has_value() || !event || event->has_value();
    }
    if (!now) {
      controls_.push_back({++arrivals_, std::string(line.text)});
      return {};
    }
    KPIPE_TRY(state_.on_control(line));
    out.write_line(line.text);
    return {};
  }

  bool stopping() const { return io_.stop != nullptr && io_.stop->load(); }

  Status poll_now(Output& out) {
    Millis now = io_.clock.steady();
    if (now - last_poll_ < kPollEvery) return {};
    last_poll_ = now;
    KPIPE_TRY(settle(out));
    KPIPE_TRY(table_.poll(engine_, 0));
    return release(out);
  }

  // The line was parsed, and the row can go where --as says: its member
  // exists, or its parent is an object.
  Status read_record(const ParsedLine& parsed) const {
    if (!parsed.status.ok()) return parsed.status;
    return check_target(parsed.values, parsed.root_type);
  }

  Status check_target(const JsonField* values, JsonType root) const {
    if (values[plan_.as_slot].type != JsonType::kMissing) return {};
    if (!plan_.parent_slot) {
      if (root == JsonType::kObject) return {};
      return data_error("--as: the line is {}, not an object", json_type_phrase(root));
    }
    const JsonField& parent = values[*plan_.parent_slot];
    if (parent.type == JsonType::kObject) return {};
    const std::string& path = plan_.parent_name;
    if (parent.type == JsonType::kMissing) return data_error("--as: field '{}' is missing", path);
    return data_error("--as: field '{}' is {}, not an object", path, json_type_phrase(parent.type));
  }

  Status emit_as_of(const Line& line, const JsonField* values, std::optional<std::string_view> key,
                    Millis time, Output& out) {
    std::optional<std::string_view> row;
    if (key) {
      VersionedTable::Found found = engine_.find_as_of(*key, time);
      if (found.pruned)
        return data_error(
            "event time {} is older than the versions kept for key {} (raise --watermark)",
            format_rfc3339(time), *key);
      row = found.row;
    }
    return emit(line, values, key, row, out);
  }

  // Where the row goes in a line: over the bytes [at, at + length), or
  // (`insert`) as a new member before the byte at `at`, its parent's
  // closing brace, after a comma unless the parent is empty.
  struct Splice {
    size_t at = 0;
    size_t length = 0;
    bool insert = false;
    bool comma = false;
  };

  Splice splice_of(std::string_view text, const JsonField* values) const {
    Splice sp;
    const JsonField& target = values[plan_.as_slot];
    if (target.type != JsonType::kMissing) {
      sp.at = static_cast<size_t>(target.raw.data() - text.data());
      sp.length = target.raw.size();
      return sp;
    }
    std::string_view object = plan_.parent_slot ? values[*plan_.parent_slot].raw : trim(text);
    sp.at = static_cast<size_t>(object.data() - text.data()) + object.size() - 1;
    sp.insert = true;
    sp.comma = object.find_first_not_of(" \t\r\n", 1) != object.size() - 1;
    return sp;
  }

  Status emit(const Line& line, const JsonField* values, std::optional<std::string_view> key,
              std::optional<std::string_view> row, Output& out) {
    return emit(line, splice_of(line.text, values), key, row, out);
  }

  Status emit(const Line& line, const Splice& sp, std::optional<std::string_view> key,
              std::optional<std::string_view> row, Output& out) {
    if (!row) {
      if (plan_.on_miss == OnMiss::kDrop) {
        ++dropped_;
        return {};
      }
      ++missed_;
      if (plan_.on_miss == OnMiss::kDlq) {
        ++dead_lettered_;
        std::string why = key ? fmt::format("no row in the table for key {}", *key)
                              : std::string("no row in the table for a null key");
        return bad_.dead_letter(std::string(line.input), line, why);
      }
    } else {
      ++joined_;
    }
    std::string_view value = row ? *row : std::string_view("null");
    std::string& buf = out.buffer();
    std::string_view text = line.text;
    buf.append(text.substr(0, sp.at));
    if (sp.insert) {
      if (sp.comma) buf.push_back(',');
      buf.append(member_);
    }
    buf.append(value);
    buf.append(text.substr(sp.at + sp.length));
    buf.push_back('\n');
    return out.end_record();
  }

  // Lookups a few records deep: a record's index slot is fetched when it
  // is parsed, its entry two records later, and it is joined two after
  // that; the cache misses of a large table overlap the parsing instead
  // of stalling it (one record apart was too close to hide them; 4 and 2
  // measured best on bench/join.sh). What is held is written before
  // anything that follows it and before the driver waits.
  struct Held {
    HeldLine line;
    std::string key;
    bool has_key = false;
    uint64_t hash = 0;
    Splice splice;
  };

  Status look_up(const Line& line, const JsonField* values, std::optional<std::string_view> key,
                 Output& out) {
    if (held_count_ == kHeld) KPIPE_TRY(settle_oldest(out));
    if (held_count_ >= kEntryAfter) {
      const Held& older = held_[(held_first_ + held_count_ - kEntryAfter) % kHeld];
      if (older.has_key) engine_.lookup_table().prefetch_entry(older.hash);
    }
    Held& h = held_[(held_first_ + held_count_) % kHeld];
    ++held_count_;
    h.line.assign(line);
    h.splice = splice_of(line.text, values);
    h.has_key = key.has_value();
    if (key) {
      h.key.assign(*key);
      h.hash = LookupTable::hash(*key);
      engine_.lookup_table().prefetch_slot(h.hash);
    }
    return {};
  }

  Status settle_oldest(Output& out) {
    Held& h = held_[held_first_];
    held_first_ = (held_first_ + 1) % kHeld;
    --held_count_;
    std::optional<std::string_view> row;
    if (h.has_key) row = engine_.lookup_table().find(h.key, h.hash);
    std::optional<std::string_view> key;
    if (h.has_key) key = h.key;
    return emit(h.line.line(), h.splice, key, row, out);
  }

  Status settle(Output& out) {
    while (held_count_ > 0) KPIPE_TRY(settle_oldest(out));
    return {};
  }

  // Joins the waiting records the table's watermark has passed (all of
  // them with `all`), oldest first.
  Status release(Output& out, bool all = false) {
    if (state_.sliced()) return release_slices(out, all);
    if (!engine_.has_pending()) return {};
    Millis watermark = engine_.table_watermark();
    while (engine_.has_pending() && (all || JoinEngine::passed(watermark, engine_.front().time))) {
      KPIPE_TRY(join_waiting(engine_.front(), out));
      engine_.pop_front();
    }
    engine_.maybe_prune(stream_newest_ - plan_.stream_disorder);
    return {};
  }

  // The same over an instance's queues, one per partition: each in its
  // order, and a control line held once every record before it is out.
  Status release_slices(Output& out, bool all) {
    if (!has_waiting()) return {};
    Millis watermark = engine_.table_watermark();
    while (true) {
      uint64_t barrier = controls_.empty() ? UINT64_MAX : controls_.front().arrival;
      Status status;
      bool before = false;  // a record from before the barrier still waits
      state_.for_each_slice([&](const TopicPartition&, Snapshottable& e) {
        auto& queue = static_cast<PendingQueue&>(e);
        while (status.ok() && !queue.empty() && queue.front().arrival < barrier &&
               (all || JoinEngine::passed(watermark, queue.front().time))) {
          status = join_waiting(queue.front(), out);
          if (status.ok()) queue.pop_front();
        }
        if (!queue.empty() && queue.front().arrival < barrier) before = true;
      });
      KPIPE_TRY(status);
      if (controls_.empty() || before) break;
      out.write_line(controls_.front().text);
      controls_.pop_front();
    }
    if (engine_.prune_due()) {
      Millis bound = stream_newest_ - plan_.stream_disorder;
      state_.for_each_slice([&](const TopicPartition&, Snapshottable& e) {
        bound = std::min(bound, static_cast<PendingQueue&>(e).oldest());
      });
      engine_.maybe_prune(bound);
    }
    return {};
  }

  // Joins a waiting record (or writes a control line held behind records).
  Status join_waiting(const PendingRecord& r, Output& out) {
    if (is_control_line(r.text)) {
      out.write_line(r.text);
      return {};
    }
    released_.assign(r.text, r.number, r.input);
    Line line = released_.line();
    Status joined = reader_.read(line.text, plan_.fields, values_);
    if (joined.ok()) {
      auto key = join_key(plan_.fields, plan_.key_slots, values_.data(), key_);
      joined = key ? emit_as_of(line, values_.data(), *key, r.time, out) : Status(key.take_error());
    }
    if (!joined.ok()) {
      if (joined.error().status != ExitStatus::kDataError) return joined;
      KPIPE_TRY(bad_.handle(r.input, line, joined.error().message));
    }
    return {};
  }

  const JoinPlan& plan_;
  JoinEngine& engine_;
  TableSource& table_;
  BadInputHandler& bad_;
  StageState& state_;
  Io& io_;
  std::string key_;
  std::string member_;  // "NAME": of --as
  static constexpr size_t kHeld = 4;
  static constexpr size_t kEntryAfter = 2;
  Held held_[kHeld];
  size_t held_first_ = 0;
  size_t held_count_ = 0;
  uint64_t since_poll_ = 0;
  Millis last_poll_ = 0;
  Millis stream_newest_ = kMinTime;
  // For waiting records, joined later.
  JsonReader reader_;
  std::vector<JsonField> values_;
  HeldLine released_;
  // An instance's control lines held behind records, with their arrival
  // (PendingRecord::arrival).
  struct HeldControl {
    uint64_t arrival = 0;
    std::string text;
  };
  std::deque<HeldControl> controls_;
  uint64_t arrivals_ = 0;
  uint64_t joined_ = 0;
  uint64_t missed_ = 0;
  uint64_t dropped_ = 0;
  uint64_t dead_lettered_ = 0;
};

}  // namespace

Status run_join(const JoinOptions& options, Io& io) {
  auto plan = make_plan(options, io.program);
  if (!plan) return plan.take_error();
  auto stats = parse_stats(options.stats, plan->stage);
  if (!stats) return stats.take_error();

  std::optional<KafkaConfig> kafka;
  if (plan->table.kind == TargetKind::kKafka) {
    auto config = resolve_kafka_config(options.kafka, io.env_brokers);
    if (!config) return config.take_error();
    if (config->brokers().empty())
      return usage_error("--table {} needs brokers: use -b or set KPIPE_BROKERS", options.table);
    kafka = std::move(*config);
  }
  auto bad = kafka ? make_bad_input_handler(options.errors, plan->stage, io, &*kafka)
                   : make_bad_input_handler(options.errors, plan->stage, io, options.kafka);
  if (!bad) return bad.take_error();

  bool persist_rows = plan->table.kind == TargetKind::kKafka;
  JoinEngine engine(plan->mode, persist_rows, plan->table_disorder, plan->idle_timeout, io.clock);
  auto store = open_stage_state(options.state);
  if (!store) return store.take_error();
  // An instance keeps the records waiting per source partition, a queue
  // of its own for each (kpipe(7), MANY INSTANCES).
  StageState state(store->get(), plan->stage, engine, io.clock,
                   StateFormat{kStateFormat, "", state_options(options)}, [] {
                     auto queue = std::make_unique<PendingQueue>();
                     queue->set_tracking(true);
                     return queue;
                   });
  uint64_t handed_over = 0;  // records waiting in partitions revoked
  state.on_restored = [&](const TopicPartition& p, Snapshottable& e,
                          std::optional<int64_t> checkpoint) {
    size_t waiting = static_cast<PendingQueue&>(e).size();
    if (!checkpoint || waiting == 0) return;
    io.reporter.info(fmt::format(
        "restored {} records waiting for the table of '{}' for {} [{}] from checkpoint {} in '{}'",
        waiting, plan->stage, p.topic, p.partition, *checkpoint, display_target(options.state)));
  };
  state.on_dropped = [&](const TopicPartition&, Snapshottable& e) {
    handed_over += static_cast<PendingQueue&>(e).size();
  };
  engine.set_tracking(state.enabled());
  KPIPE_TRY(await_input(store->get(), options.input, io.stop));
  auto restored = state.restore();
  if (!restored) return restored.take_error();
  if (*restored)
    io.reporter.info(fmt::format("restored {} rows of '{}' from checkpoint {} in '{}'",
                                 engine.rows(), plan->stage, **restored,
                                 display_target(options.state)));

  std::unique_ptr<TableSource> table;
  switch (plan->table.kind) {
    case TargetKind::kKafka: {
      auto consumer = Consumer::create(*kafka, "", io.reporter, io.clock);
      if (!consumer) return consumer.take_error();
      table = std::make_unique<KafkaTable>(*plan, std::move(*consumer), io);
      break;
    }
    case TargetKind::kFile:
      table = std::make_unique<FileTable>(*plan, options, io);
      break;
    case TargetKind::kSqlite:
    case TargetKind::kPostgres:
      table = std::make_unique<SqlTable>(*plan, options, io);
      break;
  }
  table->set_on_error((*bad)->mode());
  KPIPE_TRY(table->load(engine));

  JoinStage stage(*plan, engine, *table, **bad, state, io);
  FilterSettings settings{options.input, std::move(*stats)};
  Status run = run_filter(stage, settings, **bad, io);
  if (plan->table.kind == TargetKind::kKafka && table->skipped() > 1)
    io.reporter.warning(fmt::format("left out {} bad table rows in all", table->skipped()));
  if (!run.ok()) return run;
  uint64_t bad_lines = (*bad)->skipped() + (*bad)->dead_lettered() - stage.dead_lettered();
  std::string bad_part = bad_lines > 0 ? fmt::format(", {} bad", bad_lines) : "";
  // The records still waiting, and those handed over with their
  // partitions, are in the state for whoever joins them.
  io.reporter.info(fmt::format(
      "{} records in, {} joined, {} missed, {} dropped{}; table {} rows",
      stage.joined() + stage.missed() + stage.dropped() + bad_lines + stage.waiting() + handed_over,
      stage.joined(), stage.missed(), stage.dropped(), bad_part, engine.rows()));
  return {};
}

}  // namespace kpipe
