#include "kpipe/programs/kjoin.h"

#include <catch2/catch.hpp>

#include <string>

#include "program_run.h"

// kjoin as a whole, short of the command line, on file tables: lookups
// held a few records deep come out in order, before the control lines and
// the bad line that follow them; a table of many rows is found whole; the
// --as member is set where the line has it or added to its parent.

namespace kpipe {
namespace {

using test::TempDir;

using Result = test::ProgramRun;

Result run_tool(JoinOptions o, const std::string& input, const TempDir& dir) {
  Result r;
  test::run_program("kjoin", input, dir, o.input, r, [&](Io& io) { return run_join(o, io); });
  return r;
}

JoinOptions lookup(const TempDir& dir, const std::string& table) {
  JoinOptions o;
  o.table = dir.write("table.ndjson", table);
  o.table_keys = {".id"};
  o.keys = {".uid"};
  o.as = ".user";
  return o;
}

TEST_CASE("kjoin: records held for their lookups keep their order around control lines",
          "[kjoin]") {
  TempDir dir;
  JoinOptions o = lookup(dir, "{\"id\":1,\"n\":\"a\"}\n{\"id\":2,\"n\":\"b\"}\n");
  std::string input;
  std::string expected;
  for (int i = 0; i < 7; ++i) {
    int uid = i % 3;  // 0 has no row
    input += fmt::format("{{\"uid\":{},\"i\":{}}}\n", uid, i);
    std::string row =
        uid == 0 ? "null" : fmt::format("{{\"id\":{},\"n\":\"{}\"}}", uid, uid == 1 ? "a" : "b");
    expected += fmt::format("{{\"uid\":{},\"i\":{},\"user\":{}}}\n", uid, i, row);
    if (i == 2 || i == 5) {
      input += "{\"$kpipe\":\"other\",\"at\":" + std::to_string(i) + "}\n";
      expected += "{\"$kpipe\":\"other\",\"at\":" + std::to_string(i) + "}\n";
    }
  }
  Result r = run_tool(o, input, dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == expected);
}

TEST_CASE("kjoin: the records before a bad line are written before kjoin stops", "[kjoin]") {
  TempDir dir;
  JoinOptions o = lookup(dir, "{\"id\":1}\n");
  Result r =
      run_tool(o, "{\"uid\":1,\"i\":1}\n{\"uid\":1,\"i\":2}\n{\"uid\":1,\"i\":3}\nnot json\n", dir);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kDataError);
  CHECK(r.out ==
        "{\"uid\":1,\"i\":1,\"user\":{\"id\":1}}\n{\"uid\":1,\"i\":2,\"user\":{\"id\":1}}\n"
        "{\"uid\":1,\"i\":3,\"user\":{\"id\":1}}\n");
}

TEST_CASE("kjoin: every row of a large table is found, the last of a key winning", "[kjoin]") {
  TempDir dir;
  std::string table;
  for (int i = 0; i < 20000; ++i) table += fmt::format("{{\"id\":\"k{}\",\"v\":{}}}\n", i, i);
  table += "{\"id\":\"k7\",\"v\":\"again\"}\n";
  JoinOptions o = lookup(dir, table);
  o.keys = {".k"};
  o.as = ".row";
  std::string input;
  std::string expected;
  for (int i = 19999; i >= 0; i -= 7) {
    input += fmt::format("{{\"k\":\"k{}\"}}\n", i);
    std::string v = i == 7 ? "\"again\"" : std::to_string(i);
    expected += fmt::format("{{\"k\":\"k{}\",\"row\":{{\"id\":\"k{}\",\"v\":{}}}}}\n", i, i, v);
  }
  Result r = run_tool(o, input, dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == expected);
}

TEST_CASE("kjoin: --as replaces a member in place or adds it to its parent", "[kjoin]") {
  TempDir dir;
  JoinOptions o = lookup(dir, "{\"id\":1}\n");
  o.as = ".value.user";
  o.keys = {".value.uid"};
  Result r = run_tool(o,
                      "{\"value\":{\"user\": 5 ,\"uid\":1},\"z\":0}\n"
                      "{\"value\":{\"uid\":1} , \"z\":0}\n"
                      "  {\"value\":{ },\"z\":1}  \n",
                      dir);
  // The last line has no key: bad input, after the two before it.
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.out ==
        "{\"value\":{\"user\": {\"id\":1} ,\"uid\":1},\"z\":0}\n"
        "{\"value\":{\"uid\":1,\"user\":{\"id\":1}} , \"z\":0}\n");
}

}  // namespace
}  // namespace kpipe
