#include "kpipe/store/upsert_writer.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>

#include "store/upsert_fixtures.h"

using namespace kpipe;

using namespace kpipe::upsert_test;

TEST_CASE("each JSON type is stored in its own storage class") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"id"}));
  Lines lines;
  load(
      *w, lines,
      {R"({"id":1,"i":-7,"r":2.5,"s":"x","b":true,"f":false,"n":null,"o":{"a": [1, 2], "b":{}},"a":[ "x" , null ]})",
       R"({"id":2,"i":9223372036854775807,"r":9223372036854775808,"s":"","b":1e308,"f":-9223372036854775808})"});
  CHECK(dump_rows(*db, "t") ==
        "id=int:1|i=int:-7|r=real:2.5|s=text:x|b=int:1|f=int:0|n=null|o=text:{\"a\":[1,2],\"b\":{}}"
        "|a=text:[\"x\",null]\n"
        "id=int:2|i=int:9223372036854775807|r=real:9.223372036854776e+18|s=text:|b=real:1e+308|"
        "f=int:-9223372036854775808|n=null|o=null|a=null\n");
}

TEST_CASE("a table made by kupsert declares no types and is keyed without a rowid") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"k"}));
  Lines lines;
  load(*w, lines, {R"({"v":"42","k":"a"})"});
  CHECK(dump(*db, "t") ==
        "CREATE TABLE \"t\" (\"k\" NOT NULL, \"v\", PRIMARY KEY (\"k\")) WITHOUT ROWID\n"
        "k=text:a|v=text:42\n");
}

TEST_CASE("the same input twice leaves the same table") {
  const std::vector<std::string> input = {
      R"({"k":"a","v":1})",         R"({"k":"b","v":2,"w":"x"})", R"({"k":"a","v":3})",
      R"({"k":"c","v":{"d":[1]}})", R"({"k":"b","w":null})",      R"({"k":"a","z":true})",
  };
  for (auto mode : {UpsertMode::kUpsert, UpsertMode::kIgnore}) {
    auto once = open_db();
    auto twice = open_db();
    TableSpec s = spec("t", {"k"});
    s.mode = mode;
    Lines lines;
    load(*writer(*once, s), lines, input);
    load(*writer(*twice, s), lines, input);
    std::string first = dump(*twice, "t");
    load(*writer(*twice, s), lines, input);
    CHECK(dump(*twice, "t") == first);
    CHECK(dump(*once, "t") == first);
  }
}

TEST_CASE("upsert: the last write wins, field by field") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"k"}));
  Lines lines;
  load(*w, lines, {R"({"k":"a","v":1,"w":"first"})", R"({"k":"b","v":2})", R"({"k":"a","v":3})"});
  // A later batch updates what was committed before.
  load(*w, lines, {R"({"k":"b","v":4,"w":null})"});
  CHECK(dump_rows(*db, "t") ==
        "k=text:a|v=int:3|w=text:first\n"
        "k=text:b|v=int:4|w=null\n");
}

TEST_CASE("upsert: a row of its key alone changes nothing") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"k"}));
  Lines lines;
  load(*w, lines, {R"({"k":"a","v":1})"});
  load(*w, lines, {R"({"k":"a"})", R"({"k":"b"})"});
  CHECK(dump_rows(*db, "t") == "k=text:a|v=int:1\nk=text:b|v=null\n");
}

TEST_CASE("more field sets than statements kept prepared") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"k"}));
  Lines lines;
  // 512 different sets of fields, twice: statements are dropped and made
  // again on the way.
  std::vector<std::string> input;
  for (int round = 0; round < 2; ++round) {
    for (int set = 0; set < 512; ++set) {
      std::string row = fmt::format(R"({{"k":{})", set);
      for (int f = 0; f < 9; ++f)
        if (set & (1 << f)) row += fmt::format(R"(,"f{}":{})", f, round * 1000 + f);
      input.push_back(row + "}");
    }
  }
  load(*w, lines, input);
  CHECK(count(*db, "SELECT COUNT(*) FROM t") == 512);
  // Each row holds its own fields from the second round, and null elsewhere.
  CHECK(count(*db,
              "SELECT COUNT(*) FROM t WHERE (f0 IS NOT NULL) != ((k & 1) != 0) OR (f8 IS NOT NULL) "
              "!= ((k & 256) != 0)") == 0);
  CHECK(count(*db, "SELECT COUNT(*) FROM t WHERE f3 IS NOT NULL AND f3 != 1003") == 0);
  CHECK(count(*db, "SELECT COUNT(*) FROM t WHERE f3 = 1003") == 256);
}

TEST_CASE("ignore: the first write wins") {
  auto db = open_db();
  TableSpec s = spec("t", {"k"});
  s.mode = UpsertMode::kIgnore;
  auto w = writer(*db, s);
  Lines lines;
  load(*w, lines, {R"({"k":"a","v":1})", R"({"k":"a","v":2,"w":"x"})"});
  load(*w, lines, {R"({"k":"a","v":3})", R"({"k":"b","v":4})"});
  CHECK(dump_rows(*db, "t") ==
        "k=text:a|v=int:1|w=null\n"
        "k=text:b|v=int:4|w=null\n");
  CHECK(w->rows_written() == 2);
  CHECK(w->rows_unchanged() == 2);
}

TEST_CASE("within a batch the last row of a key wins; 1 and 1.0 are one key") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"k"}));
  Lines lines;
  // Keys arrive out of order and repeat; 1 and 1.0 are one key to SQLite.
  std::vector<std::string> input;
  std::map<int, int> want;
  for (int i = 0; i < 500; ++i) {
    int k = (i * 37) % 101;
    input.push_back(k == 1 && i % 2 == 0 ? fmt::format(R"({{"k":1.0,"v":{}}})", i)
                                         : fmt::format(R"({{"k":{},"v":{}}})", k, i));
    want[k] = i;
  }
  load(*w, lines, input);
  std::string expected;
  for (auto [k, v] : want)
    expected += fmt::format("k={}|v=int:{}\n",
                            k == 1 && v % 2 == 0 ? "real:1" : "int:" + std::to_string(k), v);
  CHECK(dump_rows(*db, "t") == expected);
}

TEST_CASE("the key true is not the key 1: JSON types stay apart in key columns") {
  // SQLite finds 1 equal to 1: a boolean stored as 1 overwrote the row of
  // the number 1. In a key column it is stored as its JSON text; elsewhere
  // as 1 and 0, as before.
  auto db = open_db();
  auto w = writer(*db, spec("t", {"k", "b"}));
  Lines lines;
  load(*w, lines,
       {R"({"k":1,"b":0,"v":"one"})", R"({"k":true,"b":false,"v":true})",
        R"({"k":1.0,"b":0,"v":"1.0"})", R"({"k":false,"b":true,"v":false})",
        R"({"k":[true],"b":0,"v":"array"})"});
  CHECK(dump_rows(*db, "t") ==
        "k=int:1|b=int:0|v=text:1.0\n"
        "k=text:[true]|b=int:0|v=text:array\n"
        "k=text:false|b=text:true|v=int:0\n"
        "k=text:true|b=text:false|v=int:1\n");
}

TEST_CASE("a number beyond a double is bad input, not an infinity in the table") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"k"}));
  Lines lines;
  CHECK(reason_of(*w, lines, R"({"k":"a","v":1e400})") ==
        "field 'v' is 1e400, outside the range of a double");
  CHECK(reason_of(*w, lines, R"({"k":-1e309})") ==
        "field 'k' is -1e309, outside the range of a double");
  // An integer beyond 64 bits is a REAL, as SQLite reads such a literal.
  load(*w, lines, {R"({"k":"b","v":123456789012345678901234567890})"});
  CHECK(dump_rows(*db, "t") == "k=text:b|v=real:1.2345678901234568e+29\n");
}

TEST_CASE("a user's table compares keys its own way: affinity and collation") {
  auto db = open_db();
  Lines lines;
  SECTION("NOCASE: 'b' and 'B' are one key") {
    REQUIRE(db->exec("CREATE TABLE t (k TEXT COLLATE NOCASE PRIMARY KEY, v)").ok());
    load(*writer(*db, spec("t", {"k"})), lines, {R"({"k":"b","v":1})", R"({"k":"B","v":2})"});
    CHECK(dump_rows(*db, "t") == "k=text:b|v=int:2\n");
  }
  SECTION("TEXT affinity: \"1\" and 1 are one key") {
    REQUIRE(db->exec("CREATE TABLE t (k TEXT PRIMARY KEY, v)").ok());
    load(*writer(*db, spec("t", {"k"})), lines, {R"({"k":"1","v":1})", R"({"k":1,"v":2})"});
    CHECK(dump_rows(*db, "t") == "k=text:1|v=int:2\n");
  }
}

TEST_CASE("a new field adds a column; rows before it hold null") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"k"}));
  Lines lines;
  load(*w, lines, {R"({"k":"a","v":1})"});
  load(*w, lines, {R"({"k":"b","v":2,"extra":"x"})", R"({"k":"c","more":[1]})"});
  CHECK(dump(*db, "t") ==
        "CREATE TABLE \"t\" (\"k\" NOT NULL, \"v\", \"extra\", \"more\", PRIMARY KEY (\"k\")) "
        "WITHOUT ROWID\n"
        "k=text:a|v=int:1|extra=null|more=null\n"
        "k=text:b|v=int:2|extra=text:x|more=null\n"
        "k=text:c|v=null|extra=null|more=text:[1]\n");
  // Another writer later finds the columns where this one left them.
  auto again = writer(*db, spec("t", {"k"}));
  load(*again, lines, {R"({"k":"a","more":"m","extra":"e"})"});
  CHECK(dump_rows(*db, "t").starts_with("k=text:a|v=int:1|extra=text:e|more=text:m\n"));
}

TEST_CASE("fields map to columns ignoring ASCII case, as SQLite's names do") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"Key"}));
  Lines lines;
  load(*w, lines, {R"({"key":"a","Value":1})", R"({"KEY":"a","VALUE":2})"});
  CHECK(dump_rows(*db, "t") == "Key=text:a|Value=int:2\n");
  CHECK(reason_of(*w, lines, R"({"key":"b","v":1,"V":2})") ==
        "fields 'v' and 'V' name the same column (kupsert ignores ASCII case in names)");
  CHECK(reason_of(*w, lines, R"({"key":"b","value":1,"VALUE":2})") ==
        "fields 'value' and 'VALUE' name the same column (kupsert ignores ASCII case in names)");
  // A key repeated exactly: the first wins, as everywhere in kpipe.
  load(*w, lines, {R"({"key":"b","value":1,"value":2})"});
  CHECK(dump_rows(*db, "t") == "Key=text:a|Value=int:2\nKey=text:b|Value=int:1\n");
}

TEST_CASE("the fields of --columns, in its order") {
  auto db = open_db();
  TableSpec s = spec("t", {"id"});
  s.columns = {"b", "a"};
  auto w = writer(*db, s);
  Lines lines;
  load(*w, lines, {R"({"a":1,"id":"x","c":3,"b":2})", R"({"id":"y","a":4})"});
  CHECK(dump(*db, "t") ==
        "CREATE TABLE \"t\" (\"id\" NOT NULL, \"b\", \"a\", PRIMARY KEY (\"id\")) WITHOUT ROWID\n"
        "id=text:x|b=int:2|a=int:1\n"
        "id=text:y|b=null|a=int:4\n");
}

TEST_CASE("strict: a field that is not a column is bad input") {
  auto db = open_db();
  TableSpec s = spec("t", {"k"});
  s.strict = true;
  Lines lines;
  SECTION("the first row settles a new table") {
    auto w = writer(*db, s);
    load(*w, lines, {R"({"k":"a","v":1})"});
    CHECK(reason_of(*w, lines, R"({"k":"b","v":2,"w":3})") ==
          "field 'w' is not a column of table 't' (--strict)");
    load(*w, lines, {R"({"k":"b","v":2})"});
    CHECK(dump_rows(*db, "t") == "k=text:a|v=int:1\nk=text:b|v=int:2\n");
  }
  SECTION("an existing table's columns are the columns") {
    REQUIRE(db->exec("CREATE TABLE t (k PRIMARY KEY, v)").ok());
    auto w = writer(*db, s);
    CHECK(reason_of(*w, lines, R"({"k":"a","x":1})") ==
          "field 'x' is not a column of table 't' (--strict)");
  }
  SECTION("with --columns, a chosen column the table lacks is not added") {
    REQUIRE(db->exec("CREATE TABLE t (k PRIMARY KEY, v)").ok());
    s.columns = {"v", "w"};
    auto w = writer(*db, s);
    CHECK(reason_of(*w, lines, R"({"k":"a","w":1})") ==
          "field 'w' is not a column of table 't' (--strict)");
    load(*w, lines, {R"({"k":"a","v":1,"other":2})"});
    CHECK(dump(*db, "t") == "CREATE TABLE t (k PRIMARY KEY, v)\nk=text:a|v=int:1\n");
  }
}

TEST_CASE("a row without its key is bad input") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"day", "user"}));
  Lines lines;
  CHECK(reason_of(*w, lines, R"({"day":"d1","n":1})") == "key field 'user' is missing");
  CHECK(reason_of(*w, lines, R"({"day":"d1","user":null})") == "key field 'user' is null");
  CHECK(reason_of(*w, lines, R"([1,2])") == "expected a JSON object, not an array");
  CHECK(reason_of(*w, lines, R"({"day":"d1","user":"u1")") ==
        "not valid JSON: truncated object or array");
  // A refused line leaves no trace: its new field made no column.
  CHECK(reason_of(*w, lines, R"({"day":"d1","ghost":1})") == "key field 'user' is missing");
  load(*w, lines, {R"({"day":"d1","user":"u1","n":1})"});
  CHECK(dump(*db, "t") ==
        "CREATE TABLE \"t\" (\"day\" NOT NULL, \"user\" NOT NULL, \"n\", PRIMARY KEY (\"day\", "
        "\"user\")) "
        "WITHOUT ROWID\nday=text:d1|user=text:u1|n=int:1\n");
}

TEST_CASE("composite keys: rows are one row only when every key column agrees") {
  auto db = open_db();
  auto w = writer(*db, spec("w", {"window_start", "key"}));
  Lines lines;
  load(*w, lines,
       {R"({"window_start":0,"key":"a","count":1})", R"({"window_start":0,"key":"b","count":1})",
        R"({"window_start":60,"key":"a","count":1})", R"({"key":"a","window_start":0,"count":2})"});
  CHECK(dump_rows(*db, "w") ==
        "window_start=int:0|key=text:a|count=int:2\n"
        "window_start=int:0|key=text:b|count=int:1\n"
        "window_start=int:60|key=text:a|count=int:1\n");
}

TEST_CASE(
    "names: quotes, brackets, semicolons, dashes and Unicode are names; control characters are "
    "not") {
  CHECK(identifier_problem("plain").empty());
  CHECK(identifier_problem("a\"b").empty());
  CHECK(identifier_problem("[x]").empty());
  CHECK(identifier_problem("x; DROP TABLE t; --").empty());
  CHECK(identifier_problem("--").empty());
  CHECK(identifier_problem("prénom").empty());
  CHECK(identifier_problem("日本語 🎉").empty());
  CHECK(identifier_problem(std::string(kMaxIdentifierBytes, 'x')).empty());
  CHECK(identifier_problem("") == "the name is empty");
  CHECK(identifier_problem(std::string(kMaxIdentifierBytes + 1, 'x')) ==
        "the name is longer than 128 bytes (129)");
  CHECK(identifier_problem(std::string_view("a\0b", 3)) ==
        "the name holds a control character (U+0000)");
  CHECK(identifier_problem("a\nb") == "the name holds a control character (U+000A)");
  CHECK(identifier_problem("a\x7f") == "the name holds a control character (U+007F)");
  CHECK(identifier_problem("a\xc2\x85") == "the name holds a control character (U+0085)");
  CHECK(identifier_problem("\xff") == "the name is not valid UTF-8");
  CHECK(display_name("a\nb") == "a\\u000ab");
  CHECK(display_name(std::string(70, 'x')) == std::string(64, 'x') + "...");
}

TEST_CASE("hostile field names become columns named exactly so, or are refused") {
  auto db = open_db();
  REQUIRE(db->exec("CREATE TABLE victim (x)").ok());
  auto w = writer(*db, spec("t", {"k"}));
  Lines lines;
  load(
      *w, lines,
      {R"({"k":1,"a\"b":1,"[x]":2,"x; DROP TABLE victim; --":3,"--":4,"prénom":5,"日本 🎉":6,"`q`":7,"'s'":8})"});
  auto names = db->prepare("SELECT group_concat(name, '|') FROM pragma_table_info('t')");
  REQUIRE(names.ok());
  REQUIRE(*names->step());
  CHECK(names->column_text(0) == "k|a\"b|[x]|x; DROP TABLE victim; --|--|prénom|日本 🎉|`q`|'s'");
  CHECK(count(*db, "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'victim'") == 1);
  CHECK(dump_rows(*db, "t") ==
        "k=int:1|a\"b=int:1|[x]=int:2|x; DROP TABLE victim; --=int:3|--=int:4|prénom=int:5|日本 "
        "🎉=int:6|`q`=int:7|'s'=int:8\n");

  CHECK(reason_of(*w, lines, R"({"k":2,"":1})") ==
        "field '' cannot be a column: the name is empty");
  CHECK(reason_of(*w, lines, R"({"k":2,"a\u0000b":1})") ==
        "field 'a\\u0000b' cannot be a column: the name holds a control character (U+0000)");
  CHECK(reason_of(*w, lines, R"({"k":2,"a\nb":1})") ==
        "field 'a\\u000ab' cannot be a column: the name holds a control character (U+000A)");
  std::string long_name(kMaxIdentifierBytes + 1, 'n');
  CHECK(reason_of(*w, lines, fmt::format(R"({{"k":2,"{}":1}})", long_name)) ==
        fmt::format("field '{}...' cannot be a column: the name is longer than 128 bytes (129)",
                    std::string(64, 'n')));
  std::string longest(kMaxIdentifierBytes, 'n');
  load(*w, lines, {fmt::format(R"({{"k":2,"{}":1}})", longest)});
  CHECK(count(*db, "SELECT COUNT(*) FROM pragma_table_info('t') WHERE length(name) = 128") == 1);
}

TEST_CASE("hostile table and key names stay names") {
  auto db = open_db();
  REQUIRE(db->exec("CREATE TABLE victim (x)").ok());
  std::string table = "t\"; DROP TABLE victim; --";
  std::string key = "k]) ; --";
  auto w = writer(*db, spec(table, {key, "日本"}));
  Lines lines;
  load(*w, lines, {R"({"k]) ; --":"a","日本":1,"v":"x"})", R"({"k]) ; --":"a","日本":1,"v":"y"})"});
  CHECK(count(*db, "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'victim'") == 1);
  CHECK(dump_rows(*db, table) == "k]) ; --=text:a|日本=int:1|v=text:y\n");

  for (const auto& bad : std::vector<std::string>{"", "sqlite_x", "a\tb", std::string(200, 't')}) {
    Status s = validate_table_spec(spec(bad, {"k"}));
    CHECK(s.error().status == ExitStatus::kUsage);
  }
  CHECK(validate_table_spec(spec("t", {"a", "A"})).error().message ==
        "--key names the column 'A' twice (kupsert ignores ASCII case in names)");
  CHECK(validate_table_spec(spec("t", {"a", ""})).error().message == "--key '': the name is empty");
  CHECK(validate_table_spec(spec("t", {})).error().message == "--key needs at least one column");
}

TEST_CASE("hostile values stay values") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"k"}));
  Lines lines;
  load(*w, lines,
       {R"({"k":"'); DROP TABLE t; --","v":"x' OR '1'='1"})", R"({"k":"nul","v":"a\u0000b\u0000"})",
        R"({"k":"big","v":123456789012345678901234567890})", R"({"k":"\"quoted\"","v":"\\\"\n"})"});
  CHECK(count(*db, "SELECT COUNT(*) FROM t") == 4);
  CHECK(
      count(
          *db,
          "SELECT COUNT(*) FROM t WHERE k = '''); DROP TABLE t; --' AND v = 'x'' OR ''1''=''1'") ==
      1);
  // A NUL is kept: the value is all its bytes.
  CHECK(count(*db, "SELECT length(CAST(v AS BLOB)) FROM t WHERE k = 'nul'") == 4);
  CHECK(count(*db, "SELECT v = CAST(x'6100620000' AS TEXT) FROM t WHERE k = 'nul'") == 0);
  CHECK(count(*db, "SELECT CAST(v AS BLOB) = x'61006200' FROM t WHERE k = 'nul'") == 1);
  // An integer past 64 bits is a REAL, as SQLite reads such a literal.
  CHECK(count(*db, "SELECT typeof(v) = 'real' AND v > 1.2e29 FROM t WHERE k = 'big'") == 1);
  CHECK(count(*db, "SELECT v = '\\\"' || char(10) FROM t WHERE k = '\"quoted\"'") == 1);
  // A number past a double's range is JSON, but not a number SQLite can hold.
  CHECK(reason_of(*w, lines, R"({"k":"huge","v":1e400})") ==
        "field 'v' is 1e400, outside the range of a double");
}

TEST_CASE("an existing table must be keyed as --key says") {
  auto db = open_db();
  REQUIRE(db->exec("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, other)").ok());
  REQUIRE(db->exec("CREATE VIEW v AS SELECT * FROM t").ok());
  CHECK(UpsertWriter::open(*db, spec("t", {"id"})).ok());
  CHECK(UpsertWriter::open(*db, spec("T", {"NAME"})).ok());
  auto no_unique = UpsertWriter::open(*db, spec("t", {"other"}));
  CHECK(
      no_unique.error().message ==
      "table 't' in ':memory:' has no primary key or unique index on (other): --key must name one");
  CHECK(UpsertWriter::open(*db, spec("t", {"missing"})).error().message ==
        "table 't' in ':memory:' has no column 'missing' (--key)");
  CHECK(UpsertWriter::open(*db, spec("v", {"id"})).error().message ==
        "'v' in ':memory:' is a view, not a table");
}

TEST_CASE("a row the table refuses is handed back with its line; the others are written") {
  auto db = open_db();
  REQUIRE(db->exec("CREATE TABLE t (k PRIMARY KEY, v NOT NULL CHECK (v > 0))").ok());
  auto w = writer(*db, spec("t", {"k"}));
  Lines lines;
  for (const char* text :
       {R"({"k":"a","v":1})", R"({"k":"b","v":-1})", R"({"k":"c"})", R"({"k":"d","v":2})"})
    REQUIRE(w->add(lines.make(text)).ok());
  std::vector<Refusal> refused;
  flush(*w, &refused);
  REQUIRE(refused.size() == 2);
  CHECK(refused[0].line == 2);
  CHECK(refused[0].text == R"({"k":"b","v":-1})");
  CHECK(refused[0].reason == "the table refused the row: CHECK constraint failed: v > 0");
  CHECK(refused[1].line == 3);
  CHECK(refused[1].reason == "the table refused the row: NOT NULL constraint failed: t.v");
  CHECK(dump_rows(*db, "t") == "k=text:a|v=int:1\nk=text:d|v=int:2\n");
}

TEST_CASE("a field too many for SQLite is bad input, not a failure") {
  auto db = open_db();
  auto w = writer(*db, spec("t", {"k"}));
  Lines lines;
  std::string row = R"({"k":1)";
  for (int i = 0; i < db->max_columns(); ++i) row += fmt::format(R"(,"c{}":{})", i, i);
  row += "}";
  CHECK(reason_of(*w, lines, row) ==
        fmt::format("the row would give table 't' more than {} columns, the database's limit "
                    "(choose fields with --columns)",
                    db->max_columns()));
}
