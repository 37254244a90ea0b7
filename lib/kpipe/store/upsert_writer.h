// kupsert's table writer: NDJSON objects become rows of an SQLite table,
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
#include "kpipe/store/sqlite.h"
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
std::string identifier_problem(std::string_view name);

// A name made safe to show in a one-line diagnostic: control characters
// escaped as JSON escapes them, and cut after 64 bytes.
std::string display_name(std::string_view name);

// --- the table -----------------------------------------------------------------

enum class UpsertMode {
  kUpsert,  // ON CONFLICT DO UPDATE: the last write wins
  kIgnore,  // ON CONFLICT DO NOTHING: the first write wins
};

struct TableSpec {
  std::string table;
  std::vector<std::string> key;      // the natural key, at least one column
  std::vector<std::string> columns;  // --columns: only these fields, in this order
  UpsertMode mode = UpsertMode::kUpsert;
  bool strict = false;  // a field that is not a column is bad input
};

// Checks the names of a spec (usage errors), before any file is touched.
Status validate_table_spec(const TableSpec& spec);

// Turns lines into rows and writes them. add() parses a line and holds its
// row; write_pending() writes the held rows inside a transaction begun
// with begin(), so that the write lock is held only while a batch commits
// (readers never wait: WAL; the pipeline's other stages write the same
// state file).
//
// Columns: each top-level field of an object is a column; objects and
// arrays are stored as their minified JSON text, integers (within 64 bits)
// as INTEGER, other numbers as REAL (one beyond a double's range is bad
// input), strings as TEXT, booleans as 0/1 (in a key column as their JSON
// text, so that the key true is not the key 1), null as NULL. A table
// created here declares no column types, so that every value keeps the
// storage class it arrived with (a declared type's
// affinity would turn the string "42" into the integer 42), and is WITHOUT
// ROWID: rows live in key order in one B-tree, so an upsert does one
// tree's work instead of the key index's and the rowid table's. SQLite's
// names ignore ASCII case, and so does the mapping of fields to columns.
class UpsertWriter {
 public:
  static Expected<std::unique_ptr<UpsertWriter>> open(Database& db, TableSpec spec);
  ~UpsertWriter();

  // Parses one line (padded, as LineFeed gives it) and holds its row. A
  // data_error when the line is bad input: not an object, a key field
  // missing or null, a field name that cannot be a column, a number beyond
  // a double, a new field under --strict. Nothing is held for a refused
  // line.
  Status add(const Line& line);

  size_t pending() const { return rows_.size(); }
  // Drops the held rows (they follow no checkpoint: a restart replays them).
  void discard_pending();

  // BEGIN IMMEDIATE on db(); the table's schema is read again inside it,
  // since another process may have changed it since the last transaction.
  Expected<Transaction> begin();

  // A row the table refused when it was written (a constraint of a table
  // the user made): the line as it was read, the input it came from, and
  // the reason. Returning an error stops write_pending.
  using RefusedRow =
      std::function<Status(const std::string& input, const Line& line, std::string_view reason)>;

  // Creates the table or adds the columns the held rows need, then writes
  // the held rows, inside the transaction of begin(). The held rows are
  // dropped whatever happens; when `refused` returns an error,
  // write_pending returns it at once (the caller rolls back).
  Status write_pending(const RefusedRow& refused);

  Database& db() { return db_; }
  const TableSpec& spec() const { return spec_; }
  bool table_exists() const { return table_exists_; }
  uint64_t rows_written() const { return rows_written_; }
  // Rows that changed nothing: under ignore, the key was already there.
  uint64_t rows_unchanged() const { return rows_unchanged_; }

 private:
  struct Column {
    std::string name;
    bool planned = false;   // in the table, or to be created with it
    bool in_table = false;  // known to be in the table
  };
  struct ColumnSet {
    std::vector<int> ids;
    std::optional<Statement> insert;
  };
  enum class Kind : uint8_t { kNull, kInteger, kReal, kText };
  // 16 bytes: with checkpoints, every row since the last one is held.
  struct Value {
    Kind kind = Kind::kNull;
    uint32_t size = 0;  // kText
    union {
      int64_t integer = 0;
      double real;
      uint64_t offset;  // kText: in text_
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

  UpsertWriter(Database& db, TableSpec spec);
  Status load_table();
  Status refresh_if_changed();
  Status ensure_schema();
  Expected<Statement*> statement_for(ColumnSet& set);
  std::string insert_sql(const ColumnSet& set) const;
  bool is_key(int id) const;
  int add_column(std::string name, bool planned);
  int find_column(std::string_view name) const;
  uint32_t column_set_for(const std::vector<int>& ids);
  uint32_t intern_input(std::string_view input);
  void append_value(const JsonField& f, int column);

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

  Database& db_;
  TableSpec spec_;
  bool table_exists_ = false;
  bool frozen_ = false;         // --strict, and the table's columns are settled
  bool recheck_schema_ = true;  // a transaction began: others may have changed it
  bool ddl_needed_ = false;     // the table, or planned columns, to create
  int64_t schema_version_ = -1;
  std::optional<Statement> schema_version_query_;
  int max_columns_ = 2000;

  std::vector<Column> columns_;
  std::unordered_map<std::string, int> by_name_;  // ASCII-folded name -> column
  std::vector<int> key_ids_;
  size_t planned_count_ = 0;
  size_t unmapped_columns_ = 0;  // in the table, but not chosen by --columns

  std::vector<ColumnSet> column_sets_;
  std::unordered_map<std::string, uint32_t> column_set_index_;
  uint32_t last_set_ = 0;
  size_t prepared_ = 0;

  // The rows held, their values, the values' text, and the lines as they
  // were read (for a row the table refuses).
  std::vector<Row> rows_;
  std::vector<Value> values_;
  std::string text_;
  std::string raw_;
  std::vector<std::string> inputs_;

  // Per-line scratch, reused so that a steady stream allocates nothing.
  JsonReader reader_;
  std::vector<JsonMember> members_;
  std::vector<int> member_ids_;
  std::vector<int> row_ids_;
  std::vector<uint64_t> seen_;  // per column: the serial of the last row that had it
  std::vector<uint32_t> seen_member_;
  uint64_t serial_ = 0;
  std::vector<std::string> last_keys_;  // the previous line's field names...
  std::vector<int> last_ids_;           // ...and their columns (-1: not a column)
  std::string fold_scratch_;
  std::string key_scratch_;

  uint64_t rows_written_ = 0;
  uint64_t rows_unchanged_ = 0;
};

}  // namespace kpipe
