#include "kpipe/dlq_store.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "helpers.h"

using namespace kpipe;
using kpipe::test::TempDir;

namespace {

struct Row {
  int64_t at;
  std::string stage, reason, input;
  int64_t line;
  std::optional<std::string> topic;
  std::optional<int64_t> partition, offset;
  std::string payload;
  Statement::Type payload_type;
};

// Reads the store through a connection of its own, as kdlq would.
std::vector<Row> rows(const std::string& path) {
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
  std::vector<Row> out;
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

DeadLetter letter(std::string_view payload, std::string stage = "kdedup") {
  DeadLetter d;
  d.at = 1795947330123;
  d.stage = std::move(stage);
  d.reason = "line 3: field '.value.ts' is missing";
  d.input = "<stdin>";
  d.line = 3;
  d.payload = payload;
  return d;
}

}  // namespace

TEST_CASE("DlqStore: a new store is a 0600 file at schema version 1", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  mode_t old = ::umask(0);
  auto store = DlqStore::open(path);
  ::umask(old);
  REQUIRE(store.ok());
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(*(*store)->db().schema_version("dlq") == 1);
  CHECK((*store)->path() == path);
  CHECK(rows(path).empty());
}

TEST_CASE("DlqStore: rows become visible at commit, payload bytes exact", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  auto store = DlqStore::open(path);
  REQUIRE(store.ok());
  std::string binary = test::bytes("not \xff UTF-8 \x00 with a NUL\r");
  REQUIRE((*store)->add(letter(binary)).ok());
  CHECK(rows(path).empty());  // inside the open batch
  REQUIRE((*store)->commit().ok());
  auto r = rows(path);
  REQUIRE(r.size() == 1);
  CHECK(r[0].payload == binary);
  CHECK(r[0].payload_type == Statement::Type::kBlob);
  CHECK(r[0].at == 1795947330123);
  CHECK(r[0].stage == "kdedup");
  CHECK(r[0].reason == "line 3: field '.value.ts' is missing");
  CHECK(r[0].input == "<stdin>");
  CHECK(r[0].line == 3);
  CHECK_FALSE(r[0].topic);
  CHECK_FALSE(r[0].partition);
  CHECK_FALSE(r[0].offset);
  REQUIRE((*store)->commit().ok());  // nothing open: a no-op
}

TEST_CASE("DlqStore: a line from the same stage and source position is stored once", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  auto store = DlqStore::open(path);
  REQUIRE(store.ok());
  DeadLetter d = letter("{\"topic\":\"events\",\"partition\":2,\"offset\":9,\"value\":1}");
  d.source = SourcePosition{"events", 2, 9};
  REQUIRE((*store)->add(d).ok());
  REQUIRE((*store)->add(d).ok());  // a replay after a crash
  DeadLetter other_stage = d;
  other_stage.stage = "kwindow";
  REQUIRE((*store)->add(other_stage).ok());
  DeadLetter other_offset = d;
  other_offset.source->offset = 10;
  REQUIRE((*store)->add(other_offset).ok());
  DeadLetter plain = letter("not an envelope");
  REQUIRE((*store)->add(plain).ok());
  REQUIRE((*store)->add(plain).ok());  // without a position there is nothing to match on
  REQUIRE((*store)->commit().ok());
  auto r = rows(path);
  REQUIRE(r.size() == 5);
  CHECK(r[0].topic == "events");
  CHECK(r[0].partition == 2);
  CHECK(r[0].offset == 9);
  CHECK(r[1].stage == "kwindow");
  CHECK(r[2].offset == 10);
  CHECK(r[3].payload == "not an envelope");
  CHECK(r[4].payload == "not an envelope");
}

TEST_CASE("DlqStore: the store survives reopening", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  {
    auto store = DlqStore::open(path);
    REQUIRE(store.ok());
    REQUIRE((*store)->add(letter("a")).ok());
    REQUIRE((*store)->commit().ok());
    REQUIRE((*store)->add(letter("lost")).ok());  // never committed
  }
  auto again = DlqStore::open(path);
  REQUIRE(again.ok());
  REQUIRE((*again)->add(letter("b")).ok());
  REQUIRE((*again)->commit().ok());
  auto r = rows(path);
  REQUIRE(r.size() == 2);
  CHECK(r[0].payload == "a");
  CHECK(r[1].payload == "b");
}

TEST_CASE("DlqStore: read-only opening needs an existing store", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("none.db");
  auto store = DlqStore::open(path, true);
  REQUIRE_FALSE(store.ok());
  CHECK(store.error().message.starts_with("cannot open database '" + path + "': "));
  struct stat st;
  CHECK(::stat(path.c_str(), &st) != 0);  // and does not create it
}

TEST_CASE("make_store_sink writes, syncs and names the store", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  auto store = DlqStore::open(path);
  REQUIRE(store.ok());
  auto sink = make_store_sink(std::move(*store));
  CHECK(sink->describe() == path);
  REQUIRE(sink->write(letter("x")).ok());
  CHECK(rows(path).empty());
  REQUIRE(sink->sync().ok());
  CHECK(rows(path).size() == 1);
}
