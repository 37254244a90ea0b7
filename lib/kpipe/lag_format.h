// klag's three output formats: NDJSON, the table, and Prometheus's text
// exposition format.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/lag.h"
#include "kpipe/status.h"

namespace kpipe {

// What a row (a line, a series) stands for (--granularity): a partition,
// or a group's topic with its partitions summed (the largest lag in
// seconds, the worst status), for fleets whose partitions are too many to
// look at one by one.
enum class Granularity : uint8_t { kPartition, kTopic };
Expected<Granularity> parse_granularity(std::string_view text);  // "partition", "topic"

// Whose names the Prometheus metrics take (--metric-names): kpipe's own,
// or kafka_exporter's (danielqsj/kafka_exporter), so that dashboards and
// alerts written for it read klag's files unchanged.
enum class MetricNames : uint8_t { kKpipe, kKafkaExporter };
Expected<MetricNames> parse_metric_names(std::string_view text);  // "kpipe", "kafka_exporter"

// A line per partition (none with kTopic), a line per topic with its
// totals (with kTopic also its status), and a line per group with its
// totals and status.
void write_ndjson(std::string& out, const GroupReport& report,
                  Granularity granularity = Granularity::kPartition);
// Aligned columns like kafka-consumer-groups --describe, a total line per
// group (and per topic when there are several), and a TREND column of
// sparklines when `trend` is set. With kTopic, a line per topic instead of
// its partitions.
std::string render_table(const std::vector<GroupReport>& reports, bool trend,
                         Granularity granularity = Granularity::kPartition);

struct PrometheusOptions {
  Granularity granularity = Granularity::kPartition;
  MetricNames names = MetricNames::kKpipe;
};
// The text exposition format (node_exporter's textfile collector): every
// metric's HELP and TYPE once, before its samples. kKafkaExporter takes
// groups only (its label is "consumergroup").
void write_prometheus(std::string& out, const std::vector<GroupReport>& reports,
                      const PrometheusOptions& options = {});

// "▁▃▅█": one bar per value, scaled from 0 to the largest.
std::string sparkline(const std::vector<int64_t>& values);

}  // namespace kpipe
