// kbroker: librdkafka's mock cluster on loopback, for demos and tests.
#pragma once

#include <string>
#include <vector>

#include "kpipe/stage/io.h"
#include "kpipe/status.h"

namespace kpipe {

struct BrokerOptions {
  int brokers = 1;
  std::vector<std::string> topics;  // NAME or NAME:PARTITIONS
  int partitions = 4;               // for --topic NAME without a count
  std::string bootstrap_file;
};

struct TopicSpec {
  std::string name;
  int partitions = 0;
};
Expected<TopicSpec> parse_topic_spec(const std::string& text, int default_partitions);

// Prints the bootstrap list as the first line of standard output (and to
// --bootstrap-file, written atomically), then serves until asked to stop.
Status run_broker(const BrokerOptions& options, Io& io);

}  // namespace kpipe
