#include "kpipe/lag_format.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fakes.h"
#include "lag_fixtures.h"

using namespace kpipe;
using namespace kpipe::lag_test;

TEST_CASE("write_ndjson: partitions, topic totals, then the group", "[lag][output]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  std::string out;
  write_ndjson(out, engine.report(billing_history()));
  CHECK(out ==
        "{\"group\":\"billing\",\"topic\":\"audit\",\"partition\":0,\"committed\":null,\"end\":7,"
        "\"lag\":null,"
        "\"lag_seconds\":null,\"status\":null}\n"
        "{\"group\":\"billing\",\"topic\":\"events\",\"partition\":0,\"committed\":10,\"end\":40,"
        "\"lag\":30,"
        "\"lag_seconds\":125.5,\"status\":\"STALL\"}\n"
        "{\"group\":\"billing\",\"topic\":\"events\",\"partition\":1,\"committed\":50,\"end\":50,"
        "\"lag\":0,"
        "\"lag_seconds\":0,\"status\":\"OK\"}\n"
        "{\"group\":\"billing\",\"topic\":\"audit\",\"partitions\":1,\"lag\":0,\"lag_seconds\":"
        "null}\n"
        "{\"group\":\"billing\",\"topic\":\"events\",\"partitions\":2,\"lag\":30,\"lag_seconds\":"
        "125.5}\n"
        "{\"group\":\"billing\",\"at\":\"2026-11-29T10:02:00.000Z\",\"partitions\":3,\"lag\":30,"
        "\"lag_seconds\":125.5,"
        "\"status\":\"STALL\",\"reason\":\"events [0]: offset 10 did not move in 3 samples over 2m "
        "while lag stayed "
        "above 0 (now 30)\",\"members\":null}\n");
}

TEST_CASE("write_ndjson: a state file's partitions carry their commit time", "[lag][output]") {
  GroupReport r;
  r.subject = {LagSubject::Kind::kState, "pipe.db"};
  r.at = kT0;
  PartitionReport p;
  p.sample = {"events", 0, 5, 9, kT0 - kSecond, 1.0};
  p.status = LagStatus::kOk;
  r.partitions.push_back(p);
  r.total_lag = 4;
  r.max_lag_seconds = 1.0;
  r.members = 3;  // never written for a state file
  std::string out;
  write_ndjson(out, r);
  CHECK(
      out ==
      "{\"state\":\"pipe.db\",\"topic\":\"events\",\"partition\":0,\"committed\":5,\"end\":9,"
      "\"lag\":4,"
      "\"lag_seconds\":1,\"committed_at\":\"2026-11-29T09:59:59.000Z\",\"status\":\"OK\"}\n"
      "{\"state\":\"pipe.db\",\"topic\":\"events\",\"partitions\":1,\"lag\":4,\"lag_seconds\":1}\n"
      "{\"state\":\"pipe.db\",\"at\":\"2026-11-29T10:00:00.000Z\",\"partitions\":1,\"lag\":4,\"lag_"
      "seconds\":1,"
      "\"status\":\"OK\"}\n");
}

TEST_CASE("render_table: aligned columns, topic and group totals, trend", "[lag][output]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  std::vector<GroupReport> reports = {engine.report(billing_history())};
  CHECK(render_table(reports, false) ==
        "GROUP    TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  LAG-SECONDS  STATUS\n"
        "billing  audit   0                       -               7    -            -  -\n"
        "billing  audit   TOTAL                                        0            -\n"
        "billing  events  0                      10              40   30        125.5  STALL\n"
        "billing  events  1                      50              50    0          0.0  OK\n"
        "billing  events  TOTAL                                       30        125.5\n"
        "billing  TOTAL                                               30        125.5  STALL\n");
  std::string trend = render_table(reports, true);
  CHECK(trend.find("STALL   ▃▆█\n") != std::string::npos);
  CHECK(trend.find("OK      ▁█▁\n") != std::string::npos);
}

TEST_CASE("render_table: a STOP judged without members says so", "[lag][output]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {2, 0});
  auto h = billing_history();
  std::string out = render_table({engine.report(h)}, false);
  CHECK(out.find("STOP") != std::string::npos);
  CHECK(out.find("note: group 'billing': STOP judged from the offsets alone: the broker cannot "
                 "tell whether the "
                 "group has active members\n") != std::string::npos);
  // With the member count known, no note.
  for (auto& s : h) s.members = 0;
  out = render_table({engine.report(h)}, false);
  CHECK(out.find("STOP") != std::string::npos);
  CHECK(out.find("note:") == std::string::npos);
}

TEST_CASE("write_prometheus: HELP and TYPE once per metric, labels escaped", "[lag][output]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  GroupReport billing = engine.report(billing_history());
  GroupReport odd;
  odd.subject = {LagSubject::Kind::kGroup, "a\"b\\c\nd"};
  odd.at = kT0;
  odd.members = 2;
  PartitionReport p;
  p.sample = {"t", 3, 7, 9, std::nullopt, 0.25};
  p.status = LagStatus::kOk;
  odd.partitions.push_back(p);
  odd.total_lag = 2;
  odd.max_lag_seconds = 0.25;
  std::string out;
  write_prometheus(out, {billing, odd});
  CHECK(out ==
        "# HELP kpipe_consumer_lag Records between the committed offset and the log end offset.\n"
        "# TYPE kpipe_consumer_lag gauge\n"
        "kpipe_consumer_lag{group=\"billing\",topic=\"events\",partition=\"0\"} 30\n"
        "kpipe_consumer_lag{group=\"billing\",topic=\"events\",partition=\"1\"} 0\n"
        "kpipe_consumer_lag{group=\"a\\\"b\\\\c\\nd\",topic=\"t\",partition=\"3\"} 2\n"
        "# HELP kpipe_consumer_lag_seconds Seconds since the record at the committed offset was "
        "produced; 0 when "
        "caught up.\n"
        "# TYPE kpipe_consumer_lag_seconds gauge\n"
        "kpipe_consumer_lag_seconds{group=\"billing\",topic=\"events\",partition=\"0\"} 125.5\n"
        "kpipe_consumer_lag_seconds{group=\"billing\",topic=\"events\",partition=\"1\"} 0\n"
        "kpipe_consumer_lag_seconds{group=\"a\\\"b\\\\c\\nd\",topic=\"t\",partition=\"3\"} 0.25\n"
        "# HELP kpipe_consumer_committed_offset The committed offset: the next offset the consumer "
        "reads.\n"
        "# TYPE kpipe_consumer_committed_offset gauge\n"
        "kpipe_consumer_committed_offset{group=\"billing\",topic=\"events\",partition=\"0\"} 10\n"
        "kpipe_consumer_committed_offset{group=\"billing\",topic=\"events\",partition=\"1\"} 50\n"
        "kpipe_consumer_committed_offset{group=\"a\\\"b\\\\c\\nd\",topic=\"t\",partition=\"3\"} 7\n"
        "# HELP kpipe_log_end_offset The log end offset (high watermark) of the partition.\n"
        "# TYPE kpipe_log_end_offset gauge\n"
        "kpipe_log_end_offset{group=\"billing\",topic=\"audit\",partition=\"0\"} 7\n"
        "kpipe_log_end_offset{group=\"billing\",topic=\"events\",partition=\"0\"} 40\n"
        "kpipe_log_end_offset{group=\"billing\",topic=\"events\",partition=\"1\"} 50\n"
        "kpipe_log_end_offset{group=\"a\\\"b\\\\c\\nd\",topic=\"t\",partition=\"3\"} 9\n"
        "# HELP kpipe_consumer_group_lag Records behind, summed over the partitions.\n"
        "# TYPE kpipe_consumer_group_lag gauge\n"
        "kpipe_consumer_group_lag{group=\"billing\"} 30\n"
        "kpipe_consumer_group_lag{group=\"a\\\"b\\\\c\\nd\"} 2\n"
        "# HELP kpipe_consumer_group_lag_seconds The largest lag in seconds of the partitions.\n"
        "# TYPE kpipe_consumer_group_lag_seconds gauge\n"
        "kpipe_consumer_group_lag_seconds{group=\"billing\"} 125.5\n"
        "kpipe_consumer_group_lag_seconds{group=\"a\\\"b\\\\c\\nd\"} 0.25\n"
        "# HELP kpipe_consumer_group_members Active members of the group (absent: the broker "
        "cannot tell).\n"
        "# TYPE kpipe_consumer_group_members gauge\n"
        "kpipe_consumer_group_members{group=\"a\\\"b\\\\c\\nd\"} 2\n"
        "# HELP kpipe_lag_sample_timestamp_seconds When klag took the sample, in seconds since the "
        "epoch.\n"
        "# TYPE kpipe_lag_sample_timestamp_seconds gauge\n"
        "kpipe_lag_sample_timestamp_seconds{group=\"billing\"} 1795946520\n"
        "kpipe_lag_sample_timestamp_seconds{group=\"a\\\"b\\\\c\\nd\"} 1795946400\n"
        "# HELP kpipe_consumer_group_status The status by Burrow's rules: 1 for the current one, "
        "else 0.\n"
        "# TYPE kpipe_consumer_group_status gauge\n"
        "kpipe_consumer_group_status{group=\"billing\",status=\"OK\"} 0\n"
        "kpipe_consumer_group_status{group=\"billing\",status=\"WARN\"} 0\n"
        "kpipe_consumer_group_status{group=\"billing\",status=\"STALL\"} 1\n"
        "kpipe_consumer_group_status{group=\"billing\",status=\"STOP\"} 0\n"
        "kpipe_consumer_group_status{group=\"billing\",status=\"REWIND\"} 0\n"
        "kpipe_consumer_group_status{group=\"a\\\"b\\\\c\\nd\",status=\"OK\"} 1\n"
        "kpipe_consumer_group_status{group=\"a\\\"b\\\\c\\nd\",status=\"WARN\"} 0\n"
        "kpipe_consumer_group_status{group=\"a\\\"b\\\\c\\nd\",status=\"STALL\"} 0\n"
        "kpipe_consumer_group_status{group=\"a\\\"b\\\\c\\nd\",status=\"STOP\"} 0\n"
        "kpipe_consumer_group_status{group=\"a\\\"b\\\\c\\nd\",status=\"REWIND\"} 0\n");
}

TEST_CASE("sparkline scales from zero to the largest value", "[lag][output]") {
  CHECK(sparkline({0, 7, 14}) == "▁▅█");
  CHECK(sparkline({0, 1, 2, 3, 4, 5, 6, 7}) == "▁▂▃▄▅▆▇█");
  CHECK(sparkline({0, 0}) == "▁▁");
  CHECK(sparkline({5}) == "█");
  CHECK(sparkline({}).empty());
}
