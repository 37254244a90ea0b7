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

namespace {

// A state file's report: one partition 4 behind, committed a second ago.
GroupReport state_report() {
  GroupReport r;
  r.subject = {LagSubject::Kind::kState, "pipe.db"};
  r.at = kT0;
  PartitionReport p;
  p.sample = {"events", 0, 5, 9, kT0 - kSecond, 1.0};
  p.status = LagStatus::kOk;
  r.partitions.push_back(p);
  r.total_lag = 4;
  r.max_lag_seconds = 1.0;
  return r;
}

}  // namespace

TEST_CASE("write_ndjson: a state file's partitions carry their commit time", "[lag][output]") {
  GroupReport r = state_report();
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
        "# HELP kpipe_consumer_lag Records between the committed offset (without one, the offset "
        "--uncommitted counts from) and the log end offset.\n"
        "# TYPE kpipe_consumer_lag gauge\n"
        "kpipe_consumer_lag{group=\"billing\",topic=\"events\",partition=\"0\"} 30\n"
        "kpipe_consumer_lag{group=\"billing\",topic=\"events\",partition=\"1\"} 0\n"
        "kpipe_consumer_lag{group=\"a\\\"b\\\\c\\nd\",topic=\"t\",partition=\"3\"} 2\n"
        "# HELP kpipe_consumer_lag_seconds Seconds since the record at the committed offset "
        "(without one, the offset --uncommitted counts from) was produced; 0 when caught up.\n"
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
        "# HELP kpipe_consumer_group_uncommitted_partitions Partitions counted by --uncommitted: "
        "the group consumes their topic but has committed nothing on them.\n"
        "# TYPE kpipe_consumer_group_uncommitted_partitions gauge\n"
        "kpipe_consumer_group_uncommitted_partitions{group=\"billing\"} 0\n"
        "kpipe_consumer_group_uncommitted_partitions{group=\"a\\\"b\\\\c\\nd\"} 0\n"
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

TEST_CASE("write_ndjson: a partition never committed on says what was assumed (issue 22)",
          "[lag][output][uncommitted]") {
  FakeClock clock(kT0);
  for (Uncommitted u : {Uncommitted::kEarliest, Uncommitted::kLatest, Uncommitted::kIgnore}) {
    LagEngine engine(clock, {3, 0}, u);
    std::string out;
    write_ndjson(out, engine.report({engine.sample({LagSubject::Kind::kGroup, "g"}, std::nullopt,
                                                   "", never_committed_readings())}));
    std::vector<std::string> lines;
    for (size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1)
      lines.push_back(out.substr(at, nl - at));
    REQUIRE(lines.size() == 6);
    CHECK(lines[0] ==
          "{\"group\":\"g\",\"topic\":\"events\",\"partition\":0,\"committed\":300,\"end\":338,"
          "\"lag\":38,\"lag_seconds\":5,\"status\":\"OK\"}");
    switch (u) {
      case Uncommitted::kEarliest:
        CHECK(lines[3] ==
              "{\"group\":\"g\",\"topic\":\"events\",\"partition\":3,\"committed\":null,"
              "\"assumed\":\"earliest\",\"end\":162,\"lag\":162,\"lag_seconds\":40,\"status\":"
              "\"OK\"}");
        CHECK(lines[4] ==
              "{\"group\":\"g\",\"topic\":\"events\",\"partitions\":4,\"lag\":400,\"lag_seconds\":"
              "40}");
        CHECK(lines[5] ==
              "{\"group\":\"g\",\"at\":\"2026-11-29T10:00:00.000Z\",\"partitions\":4,\"lag\":400,"
              "\"lag_seconds\":40,\"status\":\"OK\",\"members\":null}");
        break;
      case Uncommitted::kLatest:
        CHECK(lines[3] ==
              "{\"group\":\"g\",\"topic\":\"events\",\"partition\":3,\"committed\":null,"
              "\"assumed\":\"latest\",\"end\":162,\"lag\":0,\"lag_seconds\":0,\"status\":\"OK\"}");
        CHECK(
            lines[4] ==
            "{\"group\":\"g\",\"topic\":\"events\",\"partitions\":4,\"lag\":76,\"lag_seconds\":5}");
        break;
      case Uncommitted::kIgnore:
        CHECK(
            lines[3] ==
            "{\"group\":\"g\",\"topic\":\"events\",\"partition\":3,\"committed\":null,\"end\":162,"
            "\"lag\":null,\"lag_seconds\":null,\"status\":null}");
        CHECK(
            lines[4] ==
            "{\"group\":\"g\",\"topic\":\"events\",\"partitions\":4,\"lag\":76,\"lag_seconds\":5}");
        break;
    }
  }
}

TEST_CASE("render_table: an assumed offset is marked, and the note says from where",
          "[lag][output][uncommitted]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  GroupReport r = engine.report({engine.sample({LagSubject::Kind::kGroup, "g"}, std::nullopt, "",
                                               never_committed_readings(7))});
  CHECK(render_table({r}, false) ==
        "GROUP  TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  LAG-SECONDS  STATUS\n"
        "g      events          0            300              338   38          5.0  OK\n"
        "g      events          1            300              338   38          4.0  OK\n"
        "g      events          2              7*             162  155         30.0  OK\n"
        "g      events          3              7*             162  155         40.0  OK\n"
        "g      TOTAL                                              386         40.0  OK\n"
        "* nothing committed: counted from the log start offset, where a consumer with "
        "auto.offset.reset=earliest begins (--uncommitted earliest)\n");
  LagEngine latest(clock, {3, 0}, Uncommitted::kLatest);
  std::string at_end =
      render_table({latest.report({latest.sample({LagSubject::Kind::kGroup, "g"}, std::nullopt, "",
                                                 never_committed_readings())})},
                   false);
  CHECK(at_end.find(
            "g      events          2            162*             162    0          0.0  OK\n") !=
        std::string::npos);
  CHECK(
      at_end.ends_with("* nothing committed: counted from the log end offset, where a consumer "
                       "with auto.offset.reset=latest begins (--uncommitted latest)\n"));
  // Nothing assumed: no mark, no note.
  LagEngine ignoring(clock, {3, 0}, Uncommitted::kIgnore);
  std::string old =
      render_table({ignoring.report({ignoring.sample({LagSubject::Kind::kGroup, "g"}, std::nullopt,
                                                     "", never_committed_readings())})},
                   false);
  CHECK(old.find('*') == std::string::npos);
}

TEST_CASE("write_prometheus: partitions never committed on have lag series, and are counted",
          "[lag][output][uncommitted]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  std::string out;
  write_prometheus(out, {engine.report({engine.sample({LagSubject::Kind::kGroup, "g"}, 2, "Stable",
                                                      never_committed_readings())})});
  CHECK(out.find("kpipe_consumer_lag{group=\"g\",topic=\"events\",partition=\"3\"} 162\n") !=
        std::string::npos);
  CHECK(out.find("kpipe_consumer_lag_seconds{group=\"g\",topic=\"events\",partition=\"3\"} 40\n") !=
        std::string::npos);
  // Nothing was committed: no committed offset series.
  CHECK(out.find("kpipe_consumer_committed_offset{group=\"g\",topic=\"events\",partition=\"3\"}") ==
        std::string::npos);
  CHECK(out.find("kpipe_consumer_group_lag{group=\"g\"} 400\n") != std::string::npos);
  CHECK(out.find("kpipe_consumer_group_uncommitted_partitions{group=\"g\"} 2\n") !=
        std::string::npos);
}

TEST_CASE("klag --granularity topic: a line per group and topic", "[lag][output][granularity]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  GroupReport billing = engine.report(billing_history());
  std::string out;
  write_ndjson(out, billing, Granularity::kTopic);
  CHECK(out ==
        "{\"group\":\"billing\",\"topic\":\"audit\",\"partitions\":1,\"uncommitted\":0,\"lag\":0,"
        "\"lag_seconds\":null,\"status\":null}\n"
        "{\"group\":\"billing\",\"topic\":\"events\",\"partitions\":2,\"uncommitted\":0,\"lag\":30,"
        "\"lag_seconds\":125.5,\"status\":\"STALL\"}\n"
        "{\"group\":\"billing\",\"at\":\"2026-11-29T10:02:00.000Z\",\"partitions\":3,\"lag\":30,"
        "\"lag_seconds\":125.5,\"status\":\"STALL\",\"reason\":\"events [0]: offset 10 did not "
        "move in 3 samples over 2m while lag stayed above 0 (now 30)\",\"members\":null}\n");
  GroupReport g = engine.report({engine.sample({LagSubject::Kind::kGroup, "g"}, std::nullopt, "",
                                               never_committed_readings())});
  CHECK(render_table({billing, g}, true, Granularity::kTopic) ==
        "GROUP    TOPIC   PARTITIONS  LAG  LAG-SECONDS  STATUS  TREND\n"
        "billing  audit           1     0            -  -\n"
        "billing  events          2    30        125.5  STALL   ▃▆█\n"
        "billing  TOTAL           3    30        125.5  STALL\n"
        "g        events          4*  400         40.0  OK      █\n"
        "g        TOTAL           4   400         40.0  OK\n"
        "* nothing committed on some partitions: counted from the log start offset, where a "
        "consumer with auto.offset.reset=earliest begins (--uncommitted earliest)\n");
  std::string prom;
  write_prometheus(prom, {g}, {Granularity::kTopic, MetricNames::kKpipe});
  CHECK(prom.find("# HELP kpipe_consumer_lag Records between the committed offset (without one, "
                  "the offset --uncommitted counts from) and the log end offset. Summed over the "
                  "topic's partitions.\n") != std::string::npos);
  CHECK(prom.find("kpipe_consumer_lag{group=\"g\",topic=\"events\"} 400\n") != std::string::npos);
  CHECK(prom.find("kpipe_consumer_lag_seconds{group=\"g\",topic=\"events\"} 40\n") !=
        std::string::npos);
  // Only the committed partitions have an offset to sum.
  CHECK(prom.find("kpipe_consumer_committed_offset{group=\"g\",topic=\"events\"} 600\n") !=
        std::string::npos);
  CHECK(prom.find("kpipe_log_end_offset{group=\"g\",topic=\"events\"} 1000\n") !=
        std::string::npos);
  CHECK(prom.find("partition=") == std::string::npos);
}

TEST_CASE("klag --metric-names kafka_exporter: its names and labels", "[lag][output][exporter]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  auto readings = never_committed_readings(0);
  GroupReport g =
      engine.report({engine.sample({LagSubject::Kind::kGroup, "g"}, 2, "Stable", readings)});
  readings.pop_back();
  GroupReport h =
      engine.report({engine.sample({LagSubject::Kind::kGroup, "h"}, 0, "Empty", readings)});
  std::string out;
  write_prometheus(out, {g, h}, {Granularity::kPartition, MetricNames::kKafkaExporter});
  auto has = [&](const std::string& line) {
    INFO(line);
    CHECK(out.find(line + "\n") != std::string::npos);
  };
  has("# TYPE kafka_consumergroup_lag gauge");
  has("kafka_consumergroup_lag{consumergroup=\"g\",topic=\"events\",partition=\"0\"} 38");
  has("kafka_consumergroup_lag{consumergroup=\"g\",topic=\"events\",partition=\"3\"} 162");
  has("kafka_consumergroup_lag_sum{consumergroup=\"g\",topic=\"events\"} 400");
  has("kafka_consumergroup_lag_sum{consumergroup=\"h\",topic=\"events\"} 238");
  has("kafka_consumergroup_current_offset{consumergroup=\"g\",topic=\"events\",partition=\"1\"} "
      "300");
  has("kafka_consumergroup_current_offset_sum{consumergroup=\"g\",topic=\"events\"} 600");
  has("kpipe_consumer_lag_seconds{consumergroup=\"g\",topic=\"events\",partition=\"3\"} 40");
  has("kafka_consumergroup_members{consumergroup=\"g\"} 2");
  has("kafka_topic_partition_current_offset{topic=\"events\",partition=\"0\"} 338");
  has("kafka_topic_partition_oldest_offset{topic=\"events\",partition=\"3\"} 0");
  has("kpipe_consumer_group_uncommitted_partitions{consumergroup=\"g\"} 2");
  has("kpipe_consumer_group_status{consumergroup=\"h\",status=\"OK\"} 1");
  // Nothing committed on partition 2: no committed offset series. A topic
  // partition is written once, whatever the groups reading it.
  CHECK(out.find("kafka_consumergroup_current_offset{consumergroup=\"g\",topic=\"events\","
                 "partition=\"2\"}") == std::string::npos);
  size_t once = out.find("kafka_topic_partition_current_offset{topic=\"events\",partition=\"0\"}");
  REQUIRE(once != std::string::npos);
  CHECK(out.find("kafka_topic_partition_current_offset{topic=\"events\",partition=\"0\"}",
                 once + 1) == std::string::npos);
  CHECK(out.find("kpipe_consumer_lag{") == std::string::npos);
  CHECK(out.find("{group=\"") == std::string::npos);

  std::string topics;
  write_prometheus(topics, {g, h}, {Granularity::kTopic, MetricNames::kKafkaExporter});
  CHECK(topics.find("kafka_consumergroup_lag_sum{consumergroup=\"g\",topic=\"events\"} 400\n") !=
        std::string::npos);
  CHECK(topics.find("partition=") == std::string::npos);
  CHECK(topics.find("kafka_consumergroup_lag{") == std::string::npos);
}

TEST_CASE("a state file's end-to-end latency beside its lag", "[lag][output]") {
  GroupReport r = state_report();
  r.latency = Latency{400, 1250, 2000, 900};
  r.latency_checkpoint = 41;
  std::string out;
  write_ndjson(out, r);
  CHECK(
      out.ends_with("\"status\":\"OK\",\"latency_ms\":{\"checkpoint\":41,\"p50\":400,\"p99\":1250,"
                    "\"max\":2000,\"records\":900}}\n"));
  std::string table = render_table({r}, false, Granularity::kPartition);
  CHECK(
      table.ends_with("end to end: pipe.db: checkpoint 41: p99 1s250ms (p50 400ms, max 2s) from "
                      "the Kafka timestamps of its 900 records to its completion\n"));
}

TEST_CASE("a Kinesis stream's shards: sequence numbers whole, lag in seconds alone",
          "[lag][output][kinesis]") {
  const std::string seq = "49590338271490256608559692538361571095921575989136588898";
  FakeClock clock(kT0);
  LagEngine engine(clock, {});
  PartitionReading behind{"clicks",          0, *Position::sequence(seq), 0, kT0 - kMinute,
                          kT0 - 90 * kSecond};
  behind.by_time = true;
  PartitionReading unread{"clicks", 1, std::nullopt, 0, std::nullopt, kT0 - 30 * kSecond};
  unread.by_time = true;
  GroupReport r = engine.report(
      {engine.sample({LagSubject::Kind::kState, "p.db"}, std::nullopt, "", {behind, unread})});
  std::string out;
  write_ndjson(out, r);
  CHECK(
      out ==
      "{\"state\":\"p.db\",\"topic\":\"clicks\",\"partition\":0,\"committed\":\"" + seq +
          "\",\"end\":null,\"lag\":null,\"lag_seconds\":90,\"committed_at\":\"2026-11-29T09:59:"
          "00.000Z\",\"status\":\"OK\"}\n"
          "{\"state\":\"p.db\",\"topic\":\"clicks\",\"partition\":1,\"committed\":null,"
          "\"assumed\":\"earliest\",\"end\":null,\"lag\":null,\"lag_seconds\":30,\"status\":"
          "\"OK\"}\n"
          "{\"state\":\"p.db\",\"topic\":\"clicks\",\"partitions\":2,\"lag\":null,\"lag_seconds\":"
          "90}\n"
          "{\"state\":\"p.db\",\"at\":\"2026-11-29T10:00:00.000Z\",\"partitions\":2,\"lag\":null,"
          "\"lag_seconds\":90,\"status\":\"OK\"}\n");
  std::string table = render_table({r}, false, Granularity::kPartition);
  CHECK(table.find(" " + seq + " ") != std::string::npos);
  CHECK(table.find("TRIM_HORIZON*") != std::string::npos);
  // No log end, no lag in records: '-', in each row and the total.
  CHECK(table.find("p.db   TOTAL") != std::string::npos);
  std::string metrics;
  write_prometheus(metrics, {r}, {});
  CHECK(metrics.find(
            "kpipe_consumer_lag_seconds{state=\"p.db\",topic=\"clicks\",partition=\"0\"} 90") !=
        std::string::npos);
  // A sequence number is no float: no offset series, nor a lag in records.
  CHECK(metrics.find("kpipe_consumer_committed_offset{") == std::string::npos);
  CHECK(metrics.find("kpipe_consumer_lag{") == std::string::npos);
  CHECK(metrics.find("kpipe_consumer_group_lag{") == std::string::npos);
}
