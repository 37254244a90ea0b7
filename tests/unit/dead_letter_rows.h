// The rows of a dead-letter store as SQLite holds them, read through a
// connection of their own (as kdlq would): for the tests of the writer
// (dead_letter_test) and of the store (dlq_store_test).
#pragma once

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "kpipe/store/sqlite.h"

namespace kpipe::test {

struct DeadLetterRow {
  int64_t at;
  std::string stage, reason, input;
  int64_t line;
  std::optional<std::string> topic;
  std::optional<int64_t> partition, offset;
  std::string payload;
  Statement::Type payload_type;
};

inline std::vector<DeadLetterRow> dead_letter_rows(const std::string& path) {
  OpenOptions o;
  o.read_only = true;
  o.create = false;
  auto db = Database::open(path, o);
  REQUIRE(db.ok());
  auto s = (*db)->prepare(
      "SELECT at, stage, reason, input, line, source_topic, source_partition, source_offset,"
      " payload"
      " FROM dead_letters ORDER BY id");
  REQUIRE(s.ok());
  std::vector<DeadLetterRow> out;
  for (;;) {
    auto more = s->step();
    REQUIRE(more.ok());
    if (!*more) break;
    out.push_back({s->column_int(0), std::string(s->column_text(1)), std::string(s->column_text(2)),
                   std::string(s->column_text(3)), s->column_int(4), s->column_optional_text(5),
                   s->column_optional_int(6), s->column_optional_int(7),
                   std::string(s->column_text(8)), s->column_type(8)});
  }
  return out;
}

}  // namespace kpipe::test
