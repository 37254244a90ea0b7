// What kjoin's table sources are tested with (kjoin_table_*_test.cpp): the
// plan and options a source is opened from, the Io it reports to, and the
// engine its rows are read into.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <string_view>

#include "fakes.h"
#include "kpipe/programs/kjoin_internal.h"

namespace kpipe {

struct TableRun {
  // `keyed_by_record`: the table's key is each record's (a topic's).
  explicit TableRun(bool keyed_by_record)
      : engine{JoinMode::kLookup, keyed_by_record, 0, 0, clock} {}
  ~TableRun() { ::close(null_fd); }
  TableRun(const TableRun&) = delete;
  TableRun& operator=(const TableRun&) = delete;

  // A key's row in the engine, "(none)" when it has none.
  std::string row(std::string_view key) const {
    auto found = engine.find(key);
    return found ? std::string(*found) : std::string("(none)");
  }

  kjoin_internal::JoinPlan plan;
  JoinOptions options;
  int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  Output out{null_fd};
  RecordingReporter reporter;
  FakeClock clock{1795946400000};
  Io io{out, reporter, clock, nullptr, "kjoin", nullptr};
  JoinEngine engine;
};

}  // namespace kpipe
