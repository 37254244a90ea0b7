// kbroker: librdkafka's mock cluster on loopback, for demos and tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kpipe/stage/io.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

struct BrokerOptions {
  int brokers = 1;
  std::vector<std::string> topics;  // NAME or NAME:PARTITIONS
  int partitions = 4;               // for --topic NAME without a count
  std::string bootstrap_file;
  std::string control;  // --control FIFO, "-" for standard input; empty: none
};

struct TopicSpec {
  std::string name;
  int partitions = 0;
};
Expected<TopicSpec> parse_topic_spec(const std::string& text, int default_partitions);

// One line of kbroker's control channel (kbroker(1), FAULTS): a fault to
// make on demand. Brokers are numbered from 1; kAllBrokers stands for
// "all" and kNoLeader for "none".
struct FaultCommand {
  enum class Kind { kError, kClear, kDown, kUp, kRtt, kCoordinator, kLeader, kTopicError };
  static constexpr int kAllBrokers = 0;
  static constexpr int kNoLeader = -1;
  Kind kind = Kind::kError;
  int api_key = -1;      // kError, kClear: Kafka's number of the request type
  std::string api_name;  // ... and its name, as Kafka spells it ("OffsetCommit")
  int count = 1;         // kError: how many requests fail
  std::string error;     // kError, kTopicError: Kafka's name of the error, upper case
  int broker = 0;        // kDown, kUp, kRtt, kCoordinator, kLeader
  Millis rtt = 0;        // kRtt
  std::string key_type;  // kCoordinator: "group" or "transaction"
  std::string key;       // kCoordinator: the group or the transactional id
  std::string topic;     // kLeader, kTopicError
  int partition = 0;     // kLeader
};

// Whether a control line carries no command (blank, or a # comment).
bool is_blank_control_line(std::string_view line);

// Parses one command; errors are usage errors whose message says what is
// wrong with the line. Kafka error names are checked only for their form
// here: the cluster knows which exist.
Expected<FaultCommand> parse_fault_command(std::string_view line);

// Prints the bootstrap list as the first line of standard output (and to
// --bootstrap-file, written atomically), then serves until asked to stop,
// applying the commands read from --control and answering each with one
// line on standard output: "ok LINE" or "error: 'LINE': WHY".
Status run_broker(const BrokerOptions& options, Io& io);

}  // namespace kpipe
