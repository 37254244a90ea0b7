// run_lag without a broker: the option checks, and `klag status`, which
// judges a history file alone.
#include "kpipe/programs/klag.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "fakes.h"
#include "kpipe/store/lag_history.h"

using namespace kpipe;

namespace {

constexpr Millis kT0 = 1'795'946'400'000;

// A scratch directory with an output file, removed at the end.
struct Scratch {
  Scratch() {
    char tmpl[] = "/tmp/kpipe-lag-run-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    out_path = dir + "/out";
    fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
  }
  ~Scratch() {
    ::close(fd);
    for (const char* f : {"/out", "/h.db", "/h.db-wal", "/h.db-shm"}) ::unlink((dir + f).c_str());
    ::rmdir(dir.c_str());
  }
  std::string output() const {
    std::ifstream in(out_path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string history() const { return dir + "/h.db"; }
  std::string dir, out_path;
  int fd = -1;
};

struct Run {
  Status status;
  std::string out;
};

Run run(LagOptions o, const Scratch& scratch, bool interactive = false) {
  Output out(scratch.fd, scratch.out_path);
  RecordingReporter reporter;
  FakeClock clock(kT0 + kHour);
  Io io{out, reporter, clock, nullptr, "klag", nullptr, interactive};
  Status s = run_lag(o, io);
  REQUIRE(out.flush().ok());
  return {s, scratch.output()};
}

std::string usage_message(LagOptions o) {
  Scratch scratch;
  Run r = run(std::move(o), scratch);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kUsage);
  CHECK(r.out.empty());
  return r.status.error().message;
}

// A group whose only partition's offset moves while its lag grows: WARN.
void write_growing_lag(const std::string& path) {
  auto h = LagHistory::open(path);
  REQUIRE(h);
  for (int i = 0; i < 4; ++i) {
    LagSample s;
    s.subject = {LagSubject::Kind::kGroup, "billing"};
    s.at = kT0 + i * kMinute;
    s.partitions.push_back({"events", 0, 100 + 10 * i, 150 + 20 * i, std::nullopt, std::nullopt});
    REQUIRE((*h)->append(s, 0).ok());
  }
}

}  // namespace

TEST_CASE("run_lag refuses contradictory or incomplete options", "[lag_run]") {
  LagOptions none;
  CHECK(usage_message(none) == "give -g GROUP or --state FILE");
  LagOptions both;
  both.groups = {"g"};
  both.state = "s.db";
  CHECK(usage_message(both) == "give -g GROUP or --state FILE, not both");
  LagOptions o;
  o.groups = {"g"};
  LagOptions w = o;
  w.window = 1;
  CHECK(usage_message(w) == "--window must be at least 2 (the rules compare samples)");
  LagOptions f = o;
  f.format = "tabel";
  CHECK(usage_message(f) == "unknown --format 'tabel', did you mean 'table'?");
  LagOptions p = o;
  p.format = "prometheus";
  p.watch = "10s";
  CHECK(usage_message(p) ==
        "--watch cannot write --format prometheus (one file per sample: run klag from cron or a "
        "timer)");
  LagOptions n = o;
  n.no_fetch = true;
  CHECK(usage_message(n) ==
        "--no-fetch estimates the lag in seconds from the end offsets of --history FILE: give one");
  LagOptions s = o;
  s.status_only = true;
  CHECK(usage_message(s) == "status judges the samples of --history FILE: give one");
  LagOptions a = o;
  a.fail_on = "STAL";
  CHECK(usage_message(a) == "unknown status 'STAL', did you mean 'STALL'?");
  LagOptions m = o;
  m.max_lag = -1;
  CHECK(usage_message(m) == "--max-lag must not be negative");
  LagOptions k = o;
  k.keep = "7";
  CHECK(usage_message(k).starts_with("--keep: "));
}

TEST_CASE("klag status judges the history alone", "[lag_run]") {
  Scratch scratch;
  write_growing_lag(scratch.history());
  LagOptions o;
  o.status_only = true;
  o.groups = {"billing"};
  o.history = scratch.history();
  o.format = "ndjson";
  o.window = 3;
  Run r = run(o, scratch);
  REQUIRE(r.status.ok());
  CHECK(r.out ==
        "{\"group\":\"billing\",\"topic\":\"events\",\"partition\":0,\"committed\":130,\"end\":210,"
        "\"lag\":80,"
        "\"lag_seconds\":null,\"status\":\"WARN\"}\n"
        "{\"group\":\"billing\",\"topic\":\"events\",\"partitions\":1,\"lag\":80,\"lag_seconds\":"
        "null}\n"
        "{\"group\":\"billing\",\"at\":\"2026-11-29T10:03:00.000Z\",\"partitions\":1,\"lag\":80,"
        "\"lag_seconds\":null,"
        "\"status\":\"WARN\",\"reason\":\"events [0]: the offset moved from 110 to 130 in 3 "
        "samples over 2m but the "
        "lag never decreased (60 to 80)\",\"members\":null}\n");
}

TEST_CASE("klag status exits with an alert at --fail-on, not below it", "[lag_run]") {
  Scratch scratch;
  write_growing_lag(scratch.history());
  LagOptions o;
  o.status_only = true;
  o.groups = {"billing"};
  o.history = scratch.history();
  o.format = "prometheus";
  o.fail_on = "STALL";
  Run calm = run(o, scratch);
  CHECK(calm.status.ok());
  CHECK(calm.out.find("kpipe_consumer_group_status{group=\"billing\",status=\"WARN\"} 1\n") !=
        std::string::npos);
  o.fail_on = "warn";
  Run r = run(o, scratch);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kAlert);
  CHECK(r.status.error().message ==
        "group 'billing' is WARN (--fail-on WARN): events [0]: the offset moved from 100 to 130 in "
        "4 samples over 3m "
        "but the lag never decreased (50 to 80)");
  // The report is written before the alert.
  CHECK(r.out.find("# TYPE kpipe_consumer_lag gauge\n") != std::string::npos);
  o.fail_on.clear();
  o.max_lag = 79;
  o.max_lag_seconds = 1;  // no time lag in this history: nothing to breach
  Run over = run(o, scratch);
  REQUIRE_FALSE(over.status.ok());
  CHECK(over.status.error().message == "group 'billing': lag 80 is over --max-lag 79");
  o.max_lag = 80;
  CHECK(run(o, scratch).status.ok());
}

TEST_CASE("klag status on a terminal draws the table with trends", "[lag_run]") {
  Scratch scratch;
  write_growing_lag(scratch.history());
  LagOptions o;
  o.status_only = true;
  o.groups = {"billing"};
  o.history = scratch.history();
  Run r = run(o, scratch, true);
  REQUIRE(r.status.ok());
  CHECK(
      r.out ==
      "GROUP    TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  LAG-SECONDS  STATUS  "
      "TREND\n"
      "billing  events          0             130             210   80            -  WARN    ▅▆▇█\n"
      "billing  TOTAL                                               80            -  WARN\n");
}

TEST_CASE("klag status names a missing history or subject", "[lag_run]") {
  Scratch scratch;
  LagOptions o;
  o.status_only = true;
  o.groups = {"billing"};
  o.history = scratch.history();
  Run missing = run(o, scratch);
  REQUIRE_FALSE(missing.status.ok());
  CHECK(missing.status.error().status == ExitStatus::kFailure);
  CHECK(missing.status.error().message ==
        "history file '" + scratch.history() + "' does not exist");
  write_growing_lag(scratch.history());
  o.groups = {"payments"};
  Run none = run(o, scratch);
  REQUIRE_FALSE(none.status.ok());
  CHECK(none.status.error().message ==
        "history '" + scratch.history() +
            "' holds no samples of group 'payments': run klag -g payments --history " +
            scratch.history() + " first");
}
