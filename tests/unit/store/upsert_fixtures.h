// What the table writer's tests and the kupsert stage's tests share:
// padded lines, a scratch directory, a table's rows as text.
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kpipe/store/upsert_writer.h"

namespace kpipe::upsert_test {

// Lines as LineFeed hands them out: padded for simdjson.
class Lines {
 public:
  Line make(std::string_view text) {
    std::string& s = store_.emplace_back(text);
    s.append(kJsonPadding, ' ');
    Line line;
    line.text = std::string_view(s).substr(0, text.size());
    line.number = ++number_;
    return line;
  }

 private:
  std::deque<std::string> store_;
  uint64_t number_ = 0;
};

class TempDir {
 public:
  TempDir() {
    std::string base = std::filesystem::temp_directory_path() / "kupsert-test.XXXXXX";
    char* made = ::mkdtemp(base.data());
    REQUIRE(made != nullptr);
    path_ = made;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::unique_ptr<Database> open_db(const std::string& path = ":memory:") {
  auto db = Database::open(path);
  REQUIRE(db.ok());
  return std::move(*db);
}

inline TableSpec spec(std::string table, std::vector<std::string> key) {
  TableSpec s;
  s.table = std::move(table);
  s.key = std::move(key);
  return s;
}

inline std::unique_ptr<UpsertWriter> writer(Database& db, TableSpec s) {
  auto w = UpsertWriter::open(db, std::move(s));
  if (!w.ok()) FAIL(w.error().message);
  return std::move(*w);
}

struct Refusal {
  uint64_t line;
  std::string text, reason;
};

// Writes the held rows in one transaction, collecting refused rows.
inline void flush(UpsertWriter& w, std::vector<Refusal>* refused = nullptr) {
  auto tx = w.begin();
  REQUIRE(tx.ok());
  Status s =
      w.write_pending([&](const std::string&, const Line& line, std::string_view reason) -> Status {
        if (refused == nullptr) return data_error("unexpected refusal: {}", reason);
        refused->push_back({line.number, std::string(line.text), std::string(reason)});
        return {};
      });
  if (!s.ok()) FAIL(s.error().message);
  REQUIRE(tx->commit().ok());
}

// Adds lines (each must be accepted) and writes them.
inline void load(UpsertWriter& w, Lines& lines, const std::vector<std::string>& input) {
  for (const auto& text : input) {
    Status s = w.add(lines.make(text));
    if (!s.ok()) FAIL(text << ": " << s.error().message);
  }
  flush(w);
}

// The whole table, schema included: every value with its storage class,
// rows in key order.
inline std::string dump(Database& db, const std::string& table) {
  std::string out;
  auto schema = db.prepare("SELECT sql FROM sqlite_schema WHERE name = ?");
  REQUIRE(schema.ok());
  schema->bind_text(1, table);
  auto row = schema->step();
  REQUIRE(row.ok());
  REQUIRE(*row);
  out.append(schema->column_text(0)).append("\n");
  auto rows = db.prepare("SELECT * FROM " + quote_identifier(table) + " ORDER BY 1, 2");
  REQUIRE(rows.ok());
  for (;;) {
    auto more = rows->step();
    REQUIRE(more.ok());
    if (!*more) break;
    for (int i = 0; i < rows->column_count(); ++i) {
      if (i > 0) out.append("|");
      out.append(rows->column_name(i)).append("=");
      switch (rows->column_type(i)) {
        case Statement::Type::kNull:
          out.append("null");
          break;
        case Statement::Type::kInteger:
          out.append("int:").append(std::to_string(rows->column_int(i)));
          break;
        case Statement::Type::kFloat:
          out.append("real:").append(fmt::format("{}", rows->column_double(i)));
          break;
        case Statement::Type::kText:
          out.append("text:").append(rows->column_text(i));
          break;
        case Statement::Type::kBlob:
          out.append("blob:").append(rows->column_text(i));
          break;
      }
    }
    out.append("\n");
  }
  return out;
}

inline std::string dump_rows(Database& db, const std::string& table) {
  std::string d = dump(db, table);
  return d.substr(d.find('\n') + 1);
}

inline int64_t count(Database& db, const std::string& sql) {
  auto stmt = db.prepare(sql);
  REQUIRE(stmt.ok());
  auto row = stmt->step();
  REQUIRE(row.ok());
  REQUIRE(*row);
  return stmt->column_int(0);
}

inline std::string reason_of(UpsertWriter& w, Lines& lines, const std::string& text) {
  Status s = w.add(lines.make(text));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kDataError);
  CHECK(w.pending() == 0);
  return s.error().message;
}

}  // namespace kpipe::upsert_test
