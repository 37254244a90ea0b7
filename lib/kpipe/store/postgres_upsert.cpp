// kupsert's PostgreSQL backend. A table created here types each column by
// the first value the rows give it: integers bigint, other numbers double
// precision, strings text, booleans boolean, objects and arrays jsonb (a
// column first seen only as null is text); the key columns are NOT NULL
// and the primary key. A value its column's type cannot take (a string in
// a bigint column) makes its row bad input.
//
// Numbers are the exception: JSON does not tell 250000 from 250000.0, and
// kpipe writes an integral double as an integer (kwindow's sums and
// averages, Avro's double), so a column's first value would otherwise
// decide whether 12.25 later fits. A bigint column (as made here, or a
// table's own) that meets a number with a fraction or an exponent becomes
// double precision, and one that meets an integer beyond 64 bits numeric,
// in the batch's transaction: the same rows in any order make the same
// table. A new column whose held values need it is made so at once.
//
// The fast path, per run of rows with the same fields: the rows go in with
// COPY into a temporary staging table, then one INSERT ... SELECT ... ON
// CONFLICT moves them into the table. One statement may not touch a row
// twice, so rows with the same key are folded first: the last wins under
// upsert, the first under ignore, as row by row. When the run fails, it is
// written again row by row, each under a savepoint, to tell the rows the
// table refuses from the others.
#include <unordered_map>

#include "kpipe/store/postgres.h"
#include "kpipe/store/upsert_writer.h"

namespace kpipe {

namespace {

// Runs shorter than this go row by row: COPY's round trips cost more.
constexpr size_t kMinCopyRows = 8;

// "schema"."name", or "name" in the search path's schema.
std::string quote_table(const TableName& table) {
  if (table.schema.empty()) return quote_identifier(table.name);
  return quote_identifier(table.schema) + "." + quote_identifier(table.name);
}

class PostgresUpsertWriter final : public UpsertWriter {
 public:
  PostgresUpsertWriter(Database& db, PgConnection& conn, TableSpec spec)
      : UpsertWriter(db, std::move(spec), kMaxPostgresNameBytes),
        conn_(conn),
        table_(quote_table(table_name_)) {}

  Status init();

 private:
  Expected<std::optional<std::vector<std::string>>> read_table() override;
  Status check_key(const std::vector<std::string>& key) override;
  Expected<bool> schema_changed() override;
  Status create_table(const std::vector<NewColumn>& columns,
                      const std::vector<std::string>& key) override;
  Status create_columns(const std::vector<NewColumn>& columns) override;
  Status lock_schema() override;
  bool needs_widening() const override;
  Status widen_columns() override;
  Status write_rows(const RefusedRow& refused) override;

  // Rows [first, last) of rows_, all of one column set.
  Status write_run(size_t first, size_t last, const RefusedRow& refused);
  Status copy_run(size_t first, size_t last);
  Status write_row_by_row(size_t first, size_t last, const RefusedRow& refused);
  // The statement's head: INSERT INTO t (cols); and its ON CONFLICT tail.
  std::string insert_head(const std::vector<int>& ids) const;
  std::string conflict_tail(const std::vector<int>& ids) const;
  void append_key(const Row& row);
  // A value as PostgreSQL's input syntax reads it (COPY's text format
  // escapes it further).
  void append_input(std::string& out, const Value& v) const;
  static std::string_view pg_type(Kind kind);
  // A new column's type: its first value's, widened for the others'.
  static std::string_view pg_type(const NewColumn& column);
  // What a bigint column must become for these values, or empty.
  static std::string_view widened_type(Kinds kinds);
  // Why a row cannot go to PostgreSQL before it is sent, or empty.
  std::string_view unsendable(const Row& row) const;

  PgConnection& conn_;  // db_'s: COPY and the server's reasons
  std::string table_;   // quoted
  std::string last_look_;
  // The table's column types as last read (format_type's words), by name.
  std::unordered_map<std::string, std::string> types_;
  uint64_t staging_ = 0;
  std::unordered_map<std::string, size_t> folded_;  // key -> index in kept_
  std::vector<size_t> kept_;
  std::string key_;
  std::string copy_;
  std::string scratch_;
};

Status PostgresUpsertWriter::init() {
  // A schema is the user's to make: kupsert makes tables, not schemas.
  if (!table_name_.schema.empty()) {
    auto schema =
        conn_.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", {table_name_.schema});
    if (!schema) return schema.take_error();
    if (schema->rows() == 0)
      return usage_error("--table '{}': '{}' has no schema '{}' (CREATE SCHEMA makes one)",
                         display_name(spec_.table), db_.path(), display_name(table_name_.schema));
  }
  return load_table();
}

Expected<std::optional<std::vector<std::string>>> PostgresUpsertWriter::read_table() {
  auto kind = conn_.query("SELECT relkind FROM pg_class WHERE oid = to_regclass($1)", {table_});
  if (!kind) return kind.take_error();
  if (kind->rows() == 0) return std::optional<std::vector<std::string>>();
  std::string_view relkind = kind->text(0, 0);
  if (relkind != "r" && relkind != "p")
    return usage_error("'{}' in '{}' is {}, not a table", display_name(spec_.table), db_.path(),
                       relkind == "v" || relkind == "m" ? "a view" : "not a table");
  auto columns = conn_.query(
      "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
      "to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
      {table_});
  if (!columns) return columns.take_error();
  std::vector<std::string> names;
  types_.clear();
  for (int r = 0; r < columns->rows(); ++r) {
    names.emplace_back(columns->text(r, 0));
    types_[names.back()] = columns->text(r, 1);
  }
  return std::optional<std::vector<std::string>>(std::move(names));
}

Status PostgresUpsertWriter::check_key(const std::vector<std::string>& key) {
  // The planner finds the unique index ON CONFLICT needs, or refuses
  // (42P10): EXPLAIN plans the statement without running it.
  std::string nulls;
  for (size_t i = 0; i < key.size(); ++i) nulls.append(i == 0 ? "NULL" : ", NULL");
  Status probe =
      conn_.exec(fmt::format("EXPLAIN INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO NOTHING",
                             table_, quoted_names(key), nulls, quoted_names(key)));
  if (probe.ok()) return {};
  if (conn_.sqlstate() == "42P10") return key_not_unique(key);
  return probe;
}

Expected<bool> PostgresUpsertWriter::schema_changed() {
  // Every change of the table's columns writes its pg_class row anew.
  auto look = conn_.query(
      "SELECT oid::text || ':' || xmin::text FROM pg_class WHERE oid = to_regclass($1)", {table_});
  if (!look) return look.take_error();
  std::string now = look->rows() == 0 ? "" : std::string(look->text(0, 0));
  bool changed = now != last_look_;
  last_look_ = std::move(now);
  return changed;
}

Status PostgresUpsertWriter::create_table(const std::vector<NewColumn>& columns,
                                          const std::vector<std::string>& key) {
  std::string sql = fmt::format("CREATE TABLE {} (", table_);
  for (const NewColumn& c : columns)
    sql.append(
        fmt::format("{} {}{}, ", quote_identifier(c.name), pg_type(c), c.key ? " NOT NULL" : ""));
  sql.append(fmt::format("PRIMARY KEY ({}))", quoted_names(key)));
  KPIPE_TRY(conn_.exec(sql));
  for (const NewColumn& c : columns) types_[c.name] = pg_type(c);
  return {};
}

Status PostgresUpsertWriter::lock_schema() {
  // Two CREATE TABLEs of one name at once fail on the catalog's unique
  // index, not IF NOT EXISTS: a lock per table until the transaction ends.
  auto locked = conn_.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                            {"kpipe upsert table:" + table_});
  if (!locked) return locked.take_error();
  return {};
}

Status PostgresUpsertWriter::create_columns(const std::vector<NewColumn>& columns) {
  for (const NewColumn& c : columns) {
    KPIPE_TRY(conn_.exec(fmt::format("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {}", table_,
                                     quote_identifier(c.name), pg_type(c))));
    types_[c.name] = pg_type(c);
  }
  return {};
}

std::string_view PostgresUpsertWriter::widened_type(Kinds kinds) {
  // numeric keeps an integer beyond 64 bits exactly, and a fraction too.
  if ((kinds & bit(Kind::kBigInteger)) != 0) return "numeric";
  if ((kinds & bit(Kind::kReal)) != 0) return "double precision";
  return {};
}

bool PostgresUpsertWriter::needs_widening() const {
  for (size_t id = 0; id < columns_.size(); ++id) {
    if (!columns_[id].in_table) continue;
    auto type = types_.find(columns_[id].name);
    if (type != types_.end() && type->second == "bigint" &&
        !widened_type(held_kinds(static_cast<int>(id))).empty())
      return true;
  }
  return false;
}

Status PostgresUpsertWriter::widen_columns() {
  for (size_t id = 0; id < columns_.size(); ++id) {
    if (!columns_[id].in_table) continue;
    auto type = types_.find(columns_[id].name);
    if (type == types_.end() || type->second != "bigint") continue;
    std::string_view wider = widened_type(held_kinds(static_cast<int>(id)));
    if (wider.empty()) continue;
    // Rewrites the table under an exclusive lock: once per column at most.
    KPIPE_TRY(conn_.exec(fmt::format("ALTER TABLE {} ALTER COLUMN {} TYPE {}", table_,
                                     quote_identifier(columns_[id].name), wider)));
    type->second = wider;
    if (reporter_ != nullptr)
      reporter_->warning(fmt::format(
          "column '{}' of table '{}' is now {}, not bigint, for {} (kupsert(1), PostgreSQL)",
          display_name(columns_[id].name), display_name(spec_.table), wider,
          wider == "numeric" ? "an integer beyond 64 bits"
                             : "a number with a fraction or exponent"));
  }
  return {};
}

std::string PostgresUpsertWriter::insert_head(const std::vector<int>& ids) const {
  return fmt::format("INSERT INTO {} ({})", table_, quoted_names(names_of(ids)));
}

std::string PostgresUpsertWriter::conflict_tail(const std::vector<int>& ids) const {
  // A row that would not change is left as it is: no new row version, no
  // index entry, nothing for VACUUM (a replay after a crash rewrites rows
  // the table already holds).
  return conflict_clause(ids, true);
}

void PostgresUpsertWriter::append_input(std::string& out, const Value& v) const {
  switch (v.kind) {
    case Kind::kNull:
      return;
    case Kind::kInteger:
      fmt::format_to(std::back_inserter(out), "{}", v.integer);
      return;
    case Kind::kReal:
      // The shortest text that reads back as the same double.
      fmt::format_to(std::back_inserter(out), "{}", v.real);
      return;
    case Kind::kBool:
      // As JSON writes it: a boolean column reads it, and a text column
      // keeps "true", not PostgreSQL's "t".
      out.append(v.integer != 0 ? "true" : "false");
      return;
    case Kind::kText:
    case Kind::kJson:
    case Kind::kBigInteger:
      out.append(text_of(v));
      return;
  }
}

std::string_view PostgresUpsertWriter::unsendable(const Row& row) const {
  const Value* v = &values_[row.first_value];
  for (size_t i = 0; i < column_ids(row.column_set).size(); ++i) {
    if (v[i].kind != Kind::kText) continue;
    // libpq sends values as C strings: a NUL would cut the value short.
    if (text_of(v[i]).find('\0') != std::string_view::npos)
      return "a string holds U+0000, which PostgreSQL's text cannot";
  }
  return {};
}

void PostgresUpsertWriter::append_key(const Row& row) {
  key_.clear();
  const Value* v = &values_[row.first_value];
  const std::vector<int>& ids = column_ids(row.column_set);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!is_key(ids[i])) continue;
    key_.push_back(static_cast<char>(v[i].kind));
    if (v[i].kind == Kind::kText || v[i].kind == Kind::kJson || v[i].kind == Kind::kBigInteger) {
      uint32_t size = v[i].size;
      key_.append(reinterpret_cast<const char*>(&size), sizeof size);
      key_.append(text_of(v[i]));
    } else {
      key_.append(reinterpret_cast<const char*>(&v[i].integer), sizeof v[i].integer);
    }
  }
}

Status PostgresUpsertWriter::write_rows(const RefusedRow& refused) {
  size_t first = 0;
  while (first < rows_.size()) {
    size_t last = first + 1;
    while (last < rows_.size() && rows_[last].column_set == rows_[first].column_set) ++last;
    KPIPE_TRY(write_run(first, last, refused));
    first = last;
  }
  return {};
}

Status PostgresUpsertWriter::write_run(size_t first, size_t last, const RefusedRow& refused) {
  if (last - first < kMinCopyRows) return write_row_by_row(first, last, refused);
  for (size_t r = first; r < last; ++r)
    if (!unsendable(rows_[r]).empty()) return write_row_by_row(first, last, refused);
  KPIPE_TRY(conn_.exec("SAVEPOINT kpipe_run"));
  Status copied = copy_run(first, last);
  if (copied.ok()) return conn_.exec("RELEASE SAVEPOINT kpipe_run");
  if (conn_.broken() || !conn_.refused_values()) return copied;
  // A row the table refuses: the run again, row by row, to tell which.
  KPIPE_TRY(conn_.exec("ROLLBACK TO SAVEPOINT kpipe_run"));
  return write_row_by_row(first, last, refused);
}

Status PostgresUpsertWriter::copy_run(size_t first, size_t last) {
  const std::vector<int>& ids = column_ids(rows_[first].column_set);
  kept_.clear();
  folded_.clear();
  folded_.reserve(last - first);
  for (size_t r = first; r < last; ++r) {
    append_key(rows_[r]);
    auto [it, fresh] = folded_.try_emplace(key_, kept_.size());
    if (fresh) {
      kept_.push_back(r);
    } else if (spec_.mode == UpsertMode::kUpsert) {
      kept_[it->second] = r;  // the last wins
    }
  }
  copy_.clear();
  for (size_t r : kept_) {
    const Value* v = &values_[rows_[r].first_value];
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) copy_.push_back('\t');
      if (v[i].kind == Kind::kNull) {
        copy_.append("\\N");
        continue;
      }
      if (v[i].kind == Kind::kText || v[i].kind == Kind::kJson) {
        append_copy_text(copy_, text_of(v[i]));
        continue;
      }
      append_input(copy_, v[i]);
    }
    copy_.push_back('\n');
  }
  std::string columns = quoted_names(names_of(ids));
  std::string staging = fmt::format("kpipe_staging_{}", ++staging_);
  KPIPE_TRY(conn_.exec(
      fmt::format("CREATE TEMP TABLE {} ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA", staging,
                  columns, table_)));
  KPIPE_TRY(conn_.copy_in(fmt::format("COPY {} ({}) FROM STDIN", staging, columns), copy_));
  // In key order: each row finds its key where the previous one left the
  // index, instead of at a random page of it.
  auto moved =
      conn_.query(fmt::format("{} SELECT {} FROM {} ORDER BY {}{}", insert_head(ids), columns,
                              staging, quoted_names(names_of(key_ids_)), conflict_tail(ids)));
  if (!moved) return moved.take_error();
  auto n = static_cast<uint64_t>(last - first);
  if (spec_.mode == UpsertMode::kUpsert) {
    rows_written_ += n;  // a folded row was written, then overwritten
  } else {
    auto inserted = static_cast<uint64_t>(moved->affected());
    rows_written_ += inserted;
    rows_unchanged_ += n - inserted;
  }
  return conn_.exec(fmt::format("DROP TABLE {}", staging));
}

Status PostgresUpsertWriter::write_row_by_row(size_t first, size_t last,
                                              const RefusedRow& refused) {
  std::string sql;
  uint32_t set = UINT32_MAX;
  std::vector<PgParam> params;
  for (size_t r = first; r < last; ++r) {
    const Row& row = rows_[r];
    std::string_view why = unsendable(row);
    if (!why.empty()) {
      KPIPE_TRY(refused(inputs_[row.input], line_of(row),
                        fmt::format("the table refused the row: {}", why)));
      continue;
    }
    const std::vector<int>& ids = column_ids(row.column_set);
    if (row.column_set != set) {
      set = row.column_set;
      std::string values;
      for (size_t i = 0; i < ids.size(); ++i)
        values.append(fmt::format("{}${}", i == 0 ? "" : ", ", i + 1));
      sql = fmt::format("{} VALUES ({}){}", insert_head(ids), values, conflict_tail(ids));
    }
    params.clear();
    const Value* v = &values_[row.first_value];
    for (size_t i = 0; i < ids.size(); ++i) {
      if (v[i].kind == Kind::kNull) {
        params.emplace_back();
        continue;
      }
      scratch_.clear();
      append_input(scratch_, v[i]);
      params.emplace_back(scratch_);
    }
    KPIPE_TRY(conn_.exec("SAVEPOINT kpipe_row"));
    auto done = conn_.query(sql, params);
    if (done) {
      // Under upsert a row that changed nothing was written all the same
      // (as SQLite counts it); under ignore it found its key taken.
      if (spec_.mode == UpsertMode::kUpsert || done->affected() > 0) {
        ++rows_written_;
      } else {
        ++rows_unchanged_;
      }
      KPIPE_TRY(conn_.exec("RELEASE SAVEPOINT kpipe_row"));
      continue;
    }
    if (conn_.broken() || !conn_.refused_values()) return done.take_error();
    KPIPE_TRY(conn_.exec("ROLLBACK TO SAVEPOINT kpipe_row"));
    KPIPE_TRY(refused(inputs_[row.input], line_of(row),
                      fmt::format("the table refused the row: {}", conn_.reason())));
  }
  return {};
}

std::string_view PostgresUpsertWriter::pg_type(Kind kind) {
  switch (kind) {
    case Kind::kInteger:
      return "bigint";
    case Kind::kReal:
      return "double precision";
    case Kind::kBigInteger:
      return "numeric";
    case Kind::kBool:
      return "boolean";
    case Kind::kJson:
      return "jsonb";
    case Kind::kText:
    case Kind::kNull:
      return "text";
  }
  return "text";
}

std::string_view PostgresUpsertWriter::pg_type(const NewColumn& column) {
  if (column.kind == Kind::kInteger) {
    std::string_view wider = widened_type(column.kinds);
    if (!wider.empty()) return wider;
  }
  return pg_type(column.kind);
}

}  // namespace

Expected<std::unique_ptr<UpsertWriter>> open_postgres_upsert_writer(Database& db, TableSpec spec) {
  KPIPE_TRY(validate_table_spec(spec, kMaxPostgresNameBytes));
  auto w = std::make_unique<PostgresUpsertWriter>(db, *db.connection(), std::move(spec));
  KPIPE_TRY(w->init());
  return std::unique_ptr<UpsertWriter>(std::move(w));
}

}  // namespace kpipe
