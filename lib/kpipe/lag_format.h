// klag's three output formats: NDJSON, the table, and Prometheus's text
// exposition format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/lag.h"

namespace kpipe {

// A line per partition, a line per topic with its totals, and a line per
// group with its totals and status.
void write_ndjson(std::string& out, const GroupReport& report);
// Aligned columns like kafka-consumer-groups --describe, a total line per
// group (and per topic when there are several), and a TREND column of
// sparklines when `trend` is set.
std::string render_table(const std::vector<GroupReport>& reports, bool trend);
// The text exposition format (node_exporter's textfile collector): every
// metric's HELP and TYPE once, before its samples.
void write_prometheus(std::string& out, const std::vector<GroupReport>& reports);

// "▁▃▅█": one bar per value, scaled from 0 to the largest.
std::string sparkline(const std::vector<int64_t>& values);

}  // namespace kpipe
