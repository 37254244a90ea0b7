#include "kpipe/text_table.h"

#include <catch2/catch.hpp>

using namespace kpipe;

TEST_CASE("TextTable: numbers right-aligned, text left-aligned, no trailing blanks", "[table]") {
  TextTable t({"TOPIC", "PARTITION", "OFFSET", "NOTE"});
  t.add_row({"events", "0", "1043", "ok"});
  t.add_row({"a", "12", "-", "behind"});
  t.add_row({"longer-topic", "3", "-7", ""});
  CHECK(t.render() ==
        "TOPIC         PARTITION  OFFSET  NOTE\n"
        "events                0    1043  ok\n"
        "a                    12       -  behind\n"
        "longer-topic          3      -7\n");
}

TEST_CASE("TextTable: one non-number makes a column text", "[table]") {
  TextTable t({"N", "V"});
  t.add_row({"1", "2.5"});
  t.add_row({"x", "10"});
  CHECK(t.render() ==
        "N    V\n"
        "1  2.5\n"
        "x   10\n");
}

TEST_CASE("TextTable: header only, short rows, UTF-8 widths", "[table]") {
  TextTable empty({"A", "B"});
  CHECK(empty.empty());
  CHECK(empty.render() == "A  B\n");
  TextTable t({"NAME", "N"});
  t.add_row({"é"});
  t.add_row({"日本", "5"});
  CHECK_FALSE(t.empty());
  // é is one column, 日本 two (display width of wide characters is not
  // counted: one column per character).
  CHECK(t.render() ==
        "NAME  N\n"
        "é\n"
        "日本    5\n");
}
