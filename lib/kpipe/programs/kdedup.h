// kdedup: drops records already seen, by key, within a horizon. The
// options of the command line and the stage that puts the dedup engine
// (dedup.h) on the NDJSON loop (filter.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/dedup.h"
#include "kpipe/kafka/config.h"
#include "kpipe/stage/filter.h"

namespace kpipe {

struct DedupOptions {
  std::vector<std::string> keys;  // --key paths; none: the whole line is the key
  std::string within;             // a duration; empty: remembered while the process lives
  std::string time;               // --time PATH; empty: processing time
  std::string time_unit = "ms";
  uint64_t max_keys = kDefaultMaxKeys;
  std::string dups;  // a file, or "dlq"; empty: duplicates are dropped
  bool exact = false;
  std::string state;  // the pipeline's state database
  std::string name;   // the stage's name in it; empty: the program's
  InputOptions input;
  ErrorOptions errors;
  KafkaOptions kafka;  // for --dlq kafka:TOPIC
  StatsOptions stats;
};

Status run_dedup(const DedupOptions& options, Io& io);

}  // namespace kpipe
