#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "fakes.h"
#include "helpers.h"
#include "kjoin_table_run.h"
#include "kpipe/programs/kjoin_internal.h"

// kjoin's table in a file of NDJSON rows, on its own: read whole, its bad
// rows and duplicate keys, and read again when the file is replaced.

namespace kpipe {
namespace {

using kjoin_internal::JoinPlan;
using kjoin_internal::TableSource;
using test::TempDir;

struct FileTableRun : TableRun {
  explicit FileTableRun(const std::string& path) : TableRun(false) {
    plan.table = Target{TargetKind::kFile, path, ""};
    plan.kind = &kjoin_internal::kFileTable;
    plan.table_key_slots.push_back(plan.table_fields.add(*FieldPath::parse(".id")));
  }

  // Opens the source; after the plan is complete.
  TableSource& open(OnError on_error = OnError::kFail) {
    auto opened = plan.kind->open(plan, options, io);
    REQUIRE(opened.ok());
    source = std::move(*opened);
    source->set_on_error(on_error);
    return *source;
  }

  std::unique_ptr<TableSource> source;
};

TEST_CASE("kjoin file table: every row is found by its key, blank lines left out",
          "[kjoin][kjoin_table_file]") {
  TempDir dir;
  FileTableRun t(dir.write("table.ndjson", "{\"id\":1,\"n\":\"a\"}\n\n{\"id\":2,\"n\":\"b\"}\n"));
  REQUIRE(t.open().load(t.engine).ok());
  CHECK(t.engine.rows() == 2);
  CHECK(t.row("1") == "{\"id\":1,\"n\":\"a\"}");
  CHECK(t.row("2") == "{\"id\":2,\"n\":\"b\"}");
  CHECK(t.reporter.warnings.empty());
  CHECK_FALSE(t.source->rows_saved());
  CHECK(t.source->kafka_log() == nullptr);
}

TEST_CASE("kjoin file table: a file that is not there is a usage error",
          "[kjoin][kjoin_table_file]") {
  TempDir dir;
  FileTableRun t(dir.file("absent.ndjson"));
  Status loaded = t.open().load(t.engine);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().status == ExitStatus::kUsage);
  CHECK(loaded.error().message == "--table: there is no file '" + dir.file("absent.ndjson") + "'");
}

TEST_CASE("kjoin file table: a bad row fails the read, or is left out with one warning",
          "[kjoin][kjoin_table_file]") {
  TempDir dir;
  std::string path = dir.write("table.ndjson", "{\"id\":1}\n{\"id\":null}\nnot json\n{\"id\":3}\n");
  SECTION("--on-error fail") {
    FileTableRun t(path);
    Status loaded = t.open().load(t.engine);
    REQUIRE_FALSE(loaded.ok());
    CHECK(loaded.error().status == ExitStatus::kDataError);
    CHECK(loaded.error().message == "table " + path + ": line 2: field '.id' is null");
  }
  SECTION("--on-error skip") {
    FileTableRun t(path);
    REQUIRE(t.open(OnError::kSkip).load(t.engine).ok());
    CHECK(t.engine.rows() == 2);
    CHECK(t.source->skipped() == 2);
    REQUIRE(t.reporter.warnings.size() == 1);
    CHECK(t.reporter.warnings[0] ==
          "left out 2 bad table rows (--on-error skip), the first: table " + path +
              ": line 2: field '.id' is null");
  }
}

TEST_CASE("kjoin file table: a key in two rows is refused", "[kjoin][kjoin_table_file]") {
  TempDir dir;
  std::string path = dir.write("table.ndjson", "{\"id\":1,\"v\":1}\n{\"id\":1,\"v\":2}\n");
  FileTableRun t(path);
  Status loaded = t.open().load(t.engine);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().status == ExitStatus::kDataError);
  CHECK(loaded.error().message == "table " + path +
                                      ": key 1 is in 2 rows (again at line 2): a table has one "
                                      "row per key");
}

TEST_CASE("kjoin file table: a replaced file is read again, a bad new version is not",
          "[kjoin][kjoin_table_file]") {
  TempDir dir;
  std::string path = dir.write("table.ndjson", "{\"id\":1,\"v\":\"old\"}\n");
  FileTableRun t(path);
  TableSource& source = t.open();
  REQUIRE(source.load(t.engine).ok());
  auto replace = [&](const std::string& rows) {
    std::string next = dir.write("next.ndjson", rows);
    REQUIRE(std::rename(next.c_str(), path.c_str()) == 0);
  };

  replace("{\"id\":1,\"v\":\"new\"}\n{\"id\":2,\"v\":\"new\"}\n");
  // Not looked at again within a second of the last look.
  REQUIRE(source.poll(t.engine, 0).ok());
  CHECK(t.row("1") == "{\"id\":1,\"v\":\"old\"}");
  t.clock.advance(1000);
  REQUIRE(source.poll(t.engine, 0).ok());
  CHECK(t.row("1") == "{\"id\":1,\"v\":\"new\"}");
  CHECK(t.engine.rows() == 2);
  REQUIRE(t.reporter.infos.size() == 1);
  CHECK(t.reporter.infos[0] == "read '" + path + "' again: 2 rows");

  replace("{\"id\":1}\n{\"id\":1}\n");
  t.clock.advance(1000);
  REQUIRE(source.poll(t.engine, 0).ok());
  CHECK(t.engine.rows() == 2);
  REQUIRE(t.reporter.warnings.size() == 1);
  CHECK(t.reporter.warnings[0] == "kept the table read before: table " + path +
                                      ": key 1 is in 2 rows (again at line 2): a table has one "
                                      "row per key");
  // The version refused is not read again, nor warned of again.
  t.clock.advance(1000);
  REQUIRE(source.poll(t.engine, 0).ok());
  CHECK(t.reporter.warnings.size() == 1);
  CHECK(t.reporter.infos.size() == 1);
}

}  // namespace
}  // namespace kpipe
