#include "kpipe/store/table_rows.h"

#include <cmath>

#include "kpipe/json.h"
#include "kpipe/store/postgres.h"
#include "kpipe/store/sql.h"

namespace kpipe {

namespace {

std::string quote_identifier(std::string_view name) {
  std::string out(1, '"');
  for (char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

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

}  // namespace

Status read_table_rows(const std::string& target, const std::string& table,
                       const std::function<Status(std::string_view row)>& each) {
  OpenOptions options;
  options.create = false;
  options.read_only = !is_postgres_target(target);
  options.wal = false;
  auto db = Database::open(target, options);
  if (!db) return db.take_error();
  std::string sql = "SELECT * FROM ";
  sql += quote_table(table);
  auto statement = (*db)->prepare(sql);
  if (!statement) return statement.take_error();
  std::string row;
  while (true) {
    auto more = statement->step();
    if (!more) return more.take_error();
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
