// kupsert's table writer: NDJSON objects become rows of a table (SQLite or
// PostgreSQL),
// upserted by a natural key, so that replaying a stream (after a crash, or
// on purpose) leaves the table as it was: the idempotent consumer. The
// stage that drives it is programs/kupsert.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kpipe/json.h"
#include "kpipe/line.h"
#include "kpipe/report.h"
#include "kpipe/store/sql.h"
#include "kpipe/store/state_store.h"

namespace kpipe {

// --- names -------------------------------------------------------------------

// Table and column names come from the command line and from the data's
// own field names. Quoting (quote_identifier) already makes every name
// data, never SQL, so quotes, brackets, semicolons, "--", spaces and any
// Unicode are accepted as they are. Refused: the empty name; names longer
// than kMaxIdentifierBytes (a name that long is data in the key position,
// and every name is repeated in the schema and in each statement); and
// control characters (C0, DEL, C1), since a NUL would end the statement
// inside SQLite's parser and the others make names that no one can type,
// read or quote back in sqlite3 or a dashboard.
constexpr size_t kMaxIdentifierBytes = 128;

// Whether two names are one to SQLite, which folds ASCII letters
// (not other letters) in identifiers.
bool same_name(std::string_view a, std::string_view b);

// Why `name` cannot be a table or column name, or empty when it can.
// PostgreSQL's names are shorter (kMaxPostgresNameBytes): it would cut a
// longer one without a word, and two fields could become one column.
constexpr size_t kMaxPostgresNameBytes = 63;
std::string identifier_problem(std::string_view name, size_t max_bytes = kMaxIdentifierBytes);

// A name made safe to show in a one-line diagnostic: control characters
// escaped as JSON escapes them, and cut after 64 bytes.
std::string display_name(std::string_view name);

// --- the table -----------------------------------------------------------------

// --table's NAME or SCHEMA.NAME: a dot separates a schema from the table,
// as in SQL and in kjoin's postgresql://...#SCHEMA.TABLE, so a table name
// holds no dot of its own. No schema: the connection's (PostgreSQL's
// search_path; SQLite's main, the file's only one).
struct TableName {
  std::string schema;  // empty: none given
  std::string name;
};
TableName split_table_name(std::string_view table);

enum class UpsertMode {
  kUpsert,  // ON CONFLICT DO UPDATE: the last write wins
  kIgnore,  // ON CONFLICT DO NOTHING: the first write wins
};

struct TableSpec {
  std::string table;                 // NAME or SCHEMA.NAME (split_table_name)
  std::vector<std::string> key;      // the natural key, at least one column
  std::vector<std::string> columns;  // --columns: only these fields, in this order
  UpsertMode mode = UpsertMode::kUpsert;
  bool strict = false;  // a field that is not a column is bad input
};

// A column named in --key or --columns: a name as it is ("a.b" is the
// field a.b), or the path form other programs take for a top-level field
// (".id", "/id", ."a.b"; kpipe(7) FIELD PATHS), which is the column of that
// field. A path into a field (".value.id") is a usage error: each line's
// top-level fields are its columns.
Expected<std::string> column_of_option(std::string_view option, std::string_view given);

// Checks the names of a spec (usage errors), before any file is touched.
Status validate_table_spec(const TableSpec& spec, size_t max_name_bytes = kMaxIdentifierBytes);

// "a", "b": names quoted for SQL (quote_identifier), comma-separated.
std::string quoted_names(const std::vector<std::string>& names);

// Turns lines into rows and writes them. add() parses a line and holds its
// row; write_pending() writes the held rows inside a transaction begun
// with begin(), so that the write lock is held only while a batch commits.
// This class is what the backends share: the mapping of fields to columns
// (ASCII case ignored, as SQLite does, on either backend), the checks that
// make a line bad input, and the rows held; a backend reads and changes
// the table and writes the rows.
//
// Columns: each top-level field of an object is a column, its type from
// the first row that has it (each backend's mapping: sqlite_upsert.cpp,
// postgres_upsert.cpp, which widens a bigint column for a number that
// needs it); a row without a field leaves its column as it was
// (upsert) or NULL (a new row). A number beyond a double's range is bad input.
class UpsertWriter {
 public:
  // The table in `db`, written by the backend of its dialect
  // (sqlite_upsert.cpp, postgres_upsert.cpp).
  static Expected<std::unique_ptr<UpsertWriter>> open(Database& db, TableSpec spec);
  virtual ~UpsertWriter();

  // Parses one line (padded, as LineFeed gives it) and holds its row. A
  // data_error when the line is bad input: not an object, a key field
  // missing or null, a field name that cannot be a column, a number beyond
  // a double, a new field under --strict. Nothing is held for a refused
  // line.
  Status add(const Line& line);

  size_t pending() const { return rows_.size(); }
  // Drops the held rows (they follow no checkpoint: a restart replays them).
  void discard_pending();

  // Begins a write transaction; the table's schema is read again inside
  // it, since another process may have changed it since the last one.
  Expected<Transaction> begin();

  // A row the table refused when it was written (a constraint of a table
  // the user made, a value of the wrong type): the line as it was read,
  // the input it came from, and the reason. Returning an error stops
  // write_pending.
  using RefusedRow =
      std::function<Status(const std::string& input, const Line& line, std::string_view reason)>;

  // Creates the table or adds the columns the held rows need, then writes
  // the held rows, inside the transaction of begin(). The held rows are
  // dropped whatever happens; when `refused` returns an error,
  // write_pending returns it at once, the rows before the refused one
  // written in the transaction and none after it: the caller rolls back,
  // or commits them (kupsert --on-error fail, kupsert(1)).
  Status write_pending(const RefusedRow& refused);

  // Where the writer says what it changed of a table the user may not
  // expect (a column widened: postgres_upsert.cpp); nowhere by default.
  void report_to(Reporter& reporter) { reporter_ = &reporter; }

  const TableSpec& spec() const { return spec_; }
  const TableName& table_name() const { return table_name_; }
  uint64_t rows_written() const { return rows_written_; }
  // Rows that changed nothing: under ignore, the key was already there.
  uint64_t rows_unchanged() const { return rows_unchanged_; }

 protected:
  // kBigInteger: an integer beyond 64 bits, kept as its text (SQLite
  // reads it as a REAL, PostgreSQL's numeric exactly).
  enum class Kind : uint8_t { kNull, kInteger, kReal, kText, kBool, kJson, kBigInteger };
  // A set of kinds, one bit each.
  using Kinds = uint8_t;
  static constexpr Kinds bit(Kind kind) { return static_cast<Kinds>(1U << static_cast<int>(kind)); }
  // 16 bytes: with checkpoints, every row since the last one is held.
  struct Value {
    Kind kind = Kind::kNull;
    uint32_t size = 0;  // kText, kJson, kBigInteger
    union {
      int64_t integer = 0;  // kInteger, kBool (0 or 1)
      double real;
      uint64_t offset;  // kText, kJson (minified), kBigInteger: in text_
    };
  };
  struct Row {
    uint32_t column_set = 0;
    uint32_t input = 0;  // in inputs_
    size_t first_value = 0;
    size_t raw_offset = 0;  // the line, in raw_
    size_t raw_size = 0;
    uint64_t line = 0;
  };
  struct Column {
    std::string name;
    bool planned = false;   // in the table, or to be created with it
    bool in_table = false;  // known to be in the table
  };
  // A column the backend is to create, and the kind of the first value
  // the held rows give it (kNull when they give none).
  struct NewColumn {
    std::string name;
    Kind kind = Kind::kNull;
    Kinds kinds = 0;  // of all the values the held rows give it
    bool key = false;
  };

  UpsertWriter(Database& db, TableSpec spec, size_t max_name_bytes);
  // Maps the table's columns and checks the key; call from the backend's
  // open(), and again whenever the schema may have changed.
  Status load_table();

  // --- what a backend does ----------------------------------------------------
  // The table's column names in order, nullopt when there is no table;
  // refuses a view (or anything else that is not a table).
  virtual Expected<std::optional<std::vector<std::string>>> read_table() = 0;
  // Refuses a key that is neither the primary key nor a unique index.
  virtual Status check_key(const std::vector<std::string>& key) = 0;
  // Whether the table's schema may have changed since the last call.
  virtual Expected<bool> schema_changed() = 0;
  virtual Status create_table(const std::vector<NewColumn>& columns,
                              const std::vector<std::string>& key) = 0;
  virtual Status create_columns(const std::vector<NewColumn>& columns) = 0;
  // Inside the write transaction, before the table is made or widened:
  // waits for any other writer doing the same (SQLite's write lock does
  // already).
  virtual Status lock_schema() { return {}; }
  // Whether a column of the table, as last read, must take a wider type
  // for the held rows' values (held_kinds); and widens those columns,
  // inside the write transaction, after lock_schema.
  virtual bool needs_widening() const { return false; }
  virtual Status widen_columns() { return {}; }
  // Writes rows_ (raw_ is padded), counting rows_written_ and
  // rows_unchanged_, calling `refused` for rows the table refuses, in
  // order; a refused row leaves the transaction usable, holding the rows
  // before it (a statement's failure undoes that statement only).
  virtual Status write_rows(const RefusedRow& refused) = 0;

  // For the backends.
  bool is_key(int id) const;
  std::vector<std::string> names_of(const std::vector<int>& ids) const;
  // check_key's refusal.
  Error key_not_unique(const std::vector<std::string>& key) const;
  // " ON CONFLICT (key) DO UPDATE SET c = excluded.c, ..." for a row of
  // these columns (DO NOTHING under ignore, or for key columns only);
  // `only_changes`: and only where the row would change.
  std::string conflict_clause(const std::vector<int>& ids, bool only_changes) const;
  std::string_view text_of(const Value& v) const { return {text_.data() + v.offset, v.size}; }
  Line line_of(const Row& row) const;
  const std::vector<int>& column_ids(uint32_t set) const { return column_sets_[set]; }
  // The kinds of the values the held rows give a column.
  Kinds held_kinds(int id) const { return held_kinds_[static_cast<size_t>(id)]; }

  Database& db_;
  TableSpec spec_;
  TableName table_name_;  // spec_.table's parts
  std::vector<Column> columns_;
  std::vector<int> key_ids_;
  std::vector<Row> rows_;
  std::vector<Value> values_;
  std::vector<std::string> inputs_;
  uint64_t rows_written_ = 0;
  uint64_t rows_unchanged_ = 0;
  Reporter* reporter_ = nullptr;

 private:
  Status ensure_schema();
  // Creates the table, or the columns, planned and not yet in it.
  Status create_planned();
  int add_column(std::string name, bool planned);
  int find_column(std::string_view name) const;
  uint32_t column_set_for(const std::vector<int>& ids);
  uint32_t intern_input(std::string_view input);
  void append_value(const JsonField& f);
  void append_non_integer(Value& v, const JsonField& f);
  Kind first_kind(int column) const;

  // add()'s phases over members_: which column each field is (into
  // member_ids_) and whether the line can be a row, changing nothing; then
  // the columns the row needs, the row held, and the line's names kept for
  // the next line, which usually has the same.
  int column_of(size_t member) const;
  Status map_members(size_t& fresh);
  Status map_new_field(size_t member);
  Status map_known_field(size_t member, int id);
  Status check_row(size_t fresh) const;
  void plan_columns();
  void hold_row(const Line& line);
  void remember_names();

  size_t max_name_bytes_;
  int max_columns_;
  bool table_exists_ = false;
  bool frozen_ = false;         // --strict, and the table's columns are settled
  bool recheck_schema_ = true;  // a transaction began: others may have changed it
  bool ddl_needed_ = false;     // the table, or planned columns, to create

  std::unordered_map<std::string, int> by_name_;  // ASCII-folded name -> column
  size_t planned_count_ = 0;
  size_t unmapped_columns_ = 0;  // in the table, but not chosen by --columns

  // Each distinct set of columns rows have, by the columns' ids.
  std::vector<std::vector<int>> column_sets_;
  std::unordered_map<std::string, uint32_t> column_set_index_;
  uint32_t last_set_ = 0;

  // The values' text, and the lines as they were read (for a row the
  // table refuses).
  std::string text_;
  std::string raw_;

  // Per-line scratch, reused so that a steady stream allocates nothing.
  JsonReader reader_;
  std::vector<JsonMember> members_;
  std::vector<int> member_ids_;
  std::vector<int> row_ids_;
  std::vector<uint64_t> seen_;  // per column: the serial of the last row that had it
  std::vector<uint32_t> seen_member_;
  uint64_t serial_ = 0;
  std::vector<Kinds> held_kinds_;       // per column
  std::vector<std::string> last_keys_;  // the previous line's field names...
  std::vector<int> last_ids_;           // ...and their columns (-1: not a column)
  std::string fold_scratch_;
  std::string key_scratch_;
};

// The backends (sqlite_upsert.cpp, postgres_upsert.cpp), which
// UpsertWriter::open chooses between.
Expected<std::unique_ptr<UpsertWriter>> open_sqlite_upsert_writer(Database& db, TableSpec spec);
Expected<std::unique_ptr<UpsertWriter>> open_postgres_upsert_writer(Database& db, TableSpec spec);

}  // namespace kpipe
