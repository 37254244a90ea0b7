// kwindow: event-time windows over NDJSON (kwindow(1)). The command line maps
// onto WindowOptions; run_window reads records with run_filter, hands them
// to the WindowEngine (window.h), and deals with what the engine leaves to
// its caller: field paths, late records, checkpoints.
#pragma once

#include <string>
#include <vector>

#include "kpipe/kafka/config.h"
#include "kpipe/stage/filter.h"
#include "kpipe/status.h"
#include "kpipe/window.h"

namespace kpipe {

struct WindowOptions {
  InputOptions input;
  ErrorOptions errors;
  KafkaOptions kafka;  // for --dlq kafka:TOPIC
  StatsOptions stats;
  std::string time;               // --time PATH (required)
  std::string time_unit = "ms";   // of numeric times
  std::vector<std::string> keys;  // --key PATH (repeatable)
  std::string tumble;             // exactly one of --tumble SIZE,
  std::string slide, every;       // --slide SIZE --every STEP,
  std::string session;            // --session GAP
  std::string watermark = "0s";
  std::string allowed_lateness = "0s";
  std::string late;               // FILE, "dlq", or empty: count them
  std::vector<std::string> aggs;  // --agg SPEC; default count
  std::string time_format = "rfc3339";
  std::string idle_timeout;  // empty: partitions never go idle
  // Checkpoints (kpipe(7), CONTROL LINES AND CHECKPOINTS).
  std::string state;
  std::string name;
  bool flush_at_end = false;
};

// The engine's configuration from the options; usage errors name the
// option at fault.
Expected<WindowConfig> window_config(const WindowOptions& options);

Status run_window(const WindowOptions& options, Io& io);

}  // namespace kpipe
