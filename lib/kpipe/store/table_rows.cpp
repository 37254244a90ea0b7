#include "kpipe/store/table_rows.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>

#include "kpipe/json.h"
#include "kpipe/store/sql.h"
#include "kpipe/target.h"

namespace kpipe {

namespace {

// "schema.name" names a table in a schema; a name holding a dot is quoted
// as one by the user's own quotes, which we do not parse: dots split.
std::string quote_table(std::string_view table) {
  std::string out;
  size_t start = 0;
  while (true) {
    size_t dot = table.find('.', start);
    if (!out.empty()) out.push_back('.');
    out += quote_identifier(table.substr(start, dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return out;
}

// Whether `table` ("name" or "schema.name") is a table or view the
// database has: asked first, so that a misspelt name is told apart from
// a fault of the database.
Expected<bool> table_exists(Database& db, std::string_view table) {
  if (db.postgres()) {
    auto s = db.prepare("SELECT 1 WHERE to_regclass(?) IS NOT NULL");
    if (!s) return s.take_error();
    s->bind_text(1, quote_table(table));
    return s->step();
  }
  size_t dot = table.find('.');
  std::string sql = "SELECT 1 FROM pragma_table_info(?";
  if (dot != std::string_view::npos) sql += ", ?";
  sql += ")";
  auto s = db.prepare(sql);
  if (!s) return s.take_error();
  if (dot == std::string_view::npos) {
    s->bind_text(1, table);
  } else {
    s->bind_text(1, table.substr(dot + 1));
    s->bind_text(2, table.substr(0, dot));
  }
  return s->step();
}

// The tables and views a user may name, as they would name them.
Expected<std::string> table_names(Database& db) {
  auto s = db.prepare(
      db.postgres()
          ? "SELECT CASE WHEN table_schema = current_schema() THEN table_name ELSE table_schema "
            "|| '.' || table_name END AS name FROM information_schema.tables WHERE table_schema "
            "NOT IN ('pg_catalog', 'information_schema') ORDER BY 1"
          : "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE "
            "'sqlite\\_%' ESCAPE '\\' ORDER BY 1");
  if (!s) return s.take_error();
  std::string names;
  while (true) {
    auto more = s->step();
    if (!more) return more.take_error();
    if (!*more) break;
    if (!names.empty()) names += ", ";
    names += s->column_text(0);
  }
  return names;
}

}  // namespace

Status read_table_rows(const std::string& target, const std::string& table,
                       const std::function<Status(const std::vector<std::string>& names)>& columns,
                       const std::function<Status(std::string_view row)>& each) {
  bool postgres = is_postgres_target(target);
  // A file that is not there is named wrongly, as a table would be; SQLite
  // would say only that it cannot open it.
  struct stat st {};
  if (!postgres && ::stat(target.c_str(), &st) != 0 && errno == ENOENT)
    return usage_error("--table: there is no SQLite file '{}'", target);
  OpenOptions options;
  options.create = false;
  options.read_only = !postgres;
  options.wal = false;
  auto db = Database::open(target, options);
  if (!db) return db.take_error();
  auto exists = table_exists(**db, table);
  if (!exists) return exists.take_error();
  if (!*exists) {
    auto names = table_names(**db);
    if (!names) return names.take_error();
    return usage_error("--table: {} has no table '{}' ({})", display_target(target), table,
                       names->empty() ? "it has none" : "it has " + *names);
  }
  std::string sql = "SELECT * FROM ";
  sql += quote_table(table);
  auto statement = (*db)->prepare(sql);
  if (!statement) return statement.take_error();
  std::string row;
  bool first = true;
  while (true) {
    auto more = statement->step();
    if (!more) return more.take_error();
    if (first) {
      first = false;
      std::vector<std::string> names;
      for (int i = 0; i < statement->column_count(); ++i)
        names.emplace_back(statement->column_name(i));
      KPIPE_TRY(columns(names));
    }
    if (!*more) break;
    row.clear();
    row.push_back('{');
    for (int i = 0; i < statement->column_count(); ++i) {
      if (i > 0) row.push_back(',');
      append_json_string(row, statement->column_name(i));
      row.push_back(':');
      std::string_view literal = statement->column_json(i);
      if (!literal.empty()) {
        row += literal;
        continue;
      }
      switch (statement->column_type(i)) {
        case Statement::Type::kNull:
          row += "null";
          break;
        case Statement::Type::kInteger:
          append_int(row, statement->column_int(i));
          break;
        case Statement::Type::kFloat: {
          double v = statement->column_double(i);
          if (std::isfinite(v))
            append_double(row, v);
          else
            row += "null";
          break;
        }
        case Statement::Type::kText: {
          std::string_view text = statement->column_text(i);
          if (is_valid_utf8(text)) {
            append_json_string(row, text);
          } else {
            row.push_back('"');
            append_base64(row, text);
            row.push_back('"');
          }
          break;
        }
        case Statement::Type::kBlob:
          row.push_back('"');
          append_base64(row, statement->column_text(i));
          row.push_back('"');
          break;
      }
    }
    row.push_back('}');
    KPIPE_TRY(each(row));
  }
  return {};
}

}  // namespace kpipe
