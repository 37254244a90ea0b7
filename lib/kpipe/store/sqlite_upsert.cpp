// kupsert's SQLite backend. A table created here declares no column types,
// so that every value keeps the storage class it arrived with (a declared
// type's affinity would turn the string "42" into the integer 42):
// integers (within 64 bits) as INTEGER, other numbers as REAL, strings as
// TEXT, booleans as 0/1 (in a key column as their JSON text, so that the
// key true is not the key 1), objects and arrays as their minified JSON
// text, null as NULL. The table is WITHOUT ROWID: rows live in key order in
// one B-tree, so an upsert does one tree's work instead of the key index's
// and the rowid table's. Readers never wait (WAL), and the write lock is
// held only while a batch commits.
#include "kpipe/store/upsert_writer.h"

#include <cstdlib>

namespace kpipe {

namespace {

// Statements kept prepared at once: rows usually share a handful of field
// sets, but optional fields can make many, and each statement holds memory.
constexpr size_t kMaxPrepared = 256;

class SqliteUpsertWriter final : public UpsertWriter {
 public:
  SqliteUpsertWriter(Database& db, TableSpec spec)
      : UpsertWriter(db, std::move(spec), kMaxIdentifierBytes) {}

  Status init() {
    auto version = db_.prepare("PRAGMA schema_version");
    if (!version) return version.take_error();
    schema_version_query_.emplace(std::move(*version));
    return load_table();
  }

 private:
  Expected<std::optional<std::vector<std::string>>> read_table() override;
  Status check_key(const std::vector<std::string>& key) override;
  Expected<bool> schema_changed() override;
  Status create_table(const std::vector<NewColumn>& columns,
                      const std::vector<std::string>& key) override;
  Status create_columns(const std::vector<NewColumn>& columns) override;
  Status write_rows(const RefusedRow& refused) override;

  std::string insert_sql(const std::vector<int>& ids) const;
  Expected<Statement*> statement_for(uint32_t set);

  std::optional<Statement> schema_version_query_;
  int64_t schema_version_ = -1;
  std::vector<std::optional<Statement>> inserts_;  // by column set
  size_t prepared_ = 0;
  std::string number_;  // scratch
};

Expected<std::optional<std::vector<std::string>>> SqliteUpsertWriter::read_table() {
  auto kind = db_.prepare(
      "SELECT type FROM sqlite_schema WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view')");
  if (!kind) return kind.take_error();
  kind->bind_text(1, table_name_.name);
  auto row = kind->step();
  if (!row) return row.take_error();
  if (!*row) return std::optional<std::vector<std::string>>();
  if (kind->column_text(0) == "view")
    return usage_error("'{}' in '{}' is a view, not a table", display_name(spec_.table),
                       db_.path());
  auto info = db_.prepare("SELECT name FROM pragma_table_info(?) ORDER BY cid");
  if (!info) return info.take_error();
  info->bind_text(1, table_name_.name);
  std::vector<std::string> names;
  for (;;) {
    auto more = info->step();
    if (!more) return more.take_error();
    if (!*more) break;
    names.emplace_back(info->column_text(0));
  }
  return std::optional<std::vector<std::string>>(std::move(names));
}

Status SqliteUpsertWriter::check_key(const std::vector<std::string>& key) {
  // ON CONFLICT needs the key to be the primary key or a unique index:
  // SQLite checks that when it prepares the statement.
  std::string params;
  for (size_t i = 0; i < key.size(); ++i) params.append(i == 0 ? "?" : ", ?");
  auto probe = db_.prepare(fmt::format(
      "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO NOTHING",
      quote_identifier(table_name_.name), quoted_names(key), params, quoted_names(key)));
  if (!probe) return key_not_unique(key);
  return {};
}

Expected<bool> SqliteUpsertWriter::schema_changed() {
  auto version = schema_version_query_->step();
  if (!version) return version.take_error();
  int64_t now = schema_version_query_->column_int(0);
  schema_version_query_->reset();
  bool changed = now != schema_version_;
  schema_version_ = now;
  if (changed) {
    inserts_.clear();  // prepared against the old schema
    prepared_ = 0;
  }
  return changed;
}

Status SqliteUpsertWriter::create_table(const std::vector<NewColumn>& columns,
                                        const std::vector<std::string>& key) {
  std::string sql = fmt::format("CREATE TABLE {} (", quote_identifier(table_name_.name));
  for (const NewColumn& c : columns) {
    sql.append(quote_identifier(c.name));
    if (c.key) sql.append(" NOT NULL");
    sql.append(", ");
  }
  sql.append(fmt::format("PRIMARY KEY ({})) WITHOUT ROWID", quoted_names(key)));
  return db_.exec(sql);
}

Status SqliteUpsertWriter::create_columns(const std::vector<NewColumn>& columns) {
  for (const NewColumn& c : columns)
    KPIPE_TRY(db_.exec(fmt::format("ALTER TABLE {} ADD COLUMN {}",
                                   quote_identifier(table_name_.name), quote_identifier(c.name))));
  return {};
}

std::string SqliteUpsertWriter::insert_sql(const std::vector<int>& ids) const {
  std::string params;
  for (size_t i = 0; i < ids.size(); ++i) params.append(i == 0 ? "?" : ", ?");
  // Every upsert counts as a change, as SQLite counts it (changes()).
  return fmt::format("INSERT INTO {} ({}) VALUES ({}){}", quote_identifier(table_name_.name),
                     quoted_names(names_of(ids)), params, conflict_clause(ids, false));
}

Expected<Statement*> SqliteUpsertWriter::statement_for(uint32_t set) {
  if (inserts_.size() <= set) inserts_.resize(set + 1);
  if (inserts_[set]) return &*inserts_[set];
  if (prepared_ >= kMaxPrepared) {
    for (auto& s : inserts_) s.reset();
    prepared_ = 0;
  }
  auto stmt = db_.prepare(insert_sql(column_ids(set)));
  if (!stmt) return stmt.take_error();
  inserts_[set].emplace(std::move(*stmt));
  ++prepared_;
  return &*inserts_[set];
}

Status SqliteUpsertWriter::write_rows(const RefusedRow& refused) {
  for (const Row& row : rows_) {
    auto stmt = statement_for(row.column_set);
    if (!stmt) return stmt.take_error();
    Statement& s = **stmt;
    const Value* v = &values_[row.first_value];
    const std::vector<int>& ids = column_ids(row.column_set);
    for (size_t i = 0; i < ids.size(); ++i) {
      int p = static_cast<int>(i + 1);
      switch (v[i].kind) {
        case Kind::kNull:
          s.bind_null(p);
          break;
        case Kind::kBool:
          // SQLite finds 1 equal to a key stored as 1: as its JSON text,
          // the key true is not the key 1 (nor 1.0), as objects and arrays
          // are stored as theirs.
          if (is_key(ids[i])) {
            s.bind_text_static(p, v[i].integer != 0 ? "true" : "false");
          } else {
            s.bind(p, v[i].integer);
          }
          break;
        case Kind::kInteger:
          s.bind(p, v[i].integer);
          break;
        case Kind::kReal:
          s.bind(p, v[i].real);
          break;
        case Kind::kBigInteger:
          // As SQLite reads such a literal: the nearest REAL.
          number_.assign(text_of(v[i]));
          s.bind(p, std::strtod(number_.c_str(), nullptr));
          break;
        case Kind::kText:
        case Kind::kJson:
          s.bind_text_static(p, text_of(v[i]));
          break;
      }
    }
    Status done = s.run();
    if (done.ok()) {
      if (db_.changes() == 0) {
        ++rows_unchanged_;
      } else {
        ++rows_written_;
      }
      continue;
    }
    if (s.refusal().empty()) return done;
    Line line = line_of(row);
    KPIPE_TRY(refused(inputs_[row.input], line,
                      fmt::format("the table refused the row: {}", s.refusal())));
  }
  return {};
}

}  // namespace

Expected<std::unique_ptr<UpsertWriter>> open_sqlite_upsert_writer(Database& db, TableSpec spec) {
  KPIPE_TRY(validate_table_spec(spec));
  // main.t is t: a file kupsert opens has no other schema (temp is the
  // connection's own, gone at exit).
  std::string schema = split_table_name(spec.table).schema;
  if (!schema.empty() && !same_name(schema, "main"))
    return usage_error("--table '{}': an SQLite file has no schema '{}', only main",
                       display_name(spec.table), display_name(schema));
  auto w = std::make_unique<SqliteUpsertWriter>(db, std::move(spec));
  KPIPE_TRY(w->init());
  return std::unique_ptr<UpsertWriter>(std::move(w));
}

}  // namespace kpipe
