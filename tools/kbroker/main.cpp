#include "kpipe/cli/cli.h"
#include "kpipe/programs/kbroker.h"

int main(int argc, char** argv) {
  kpipe::cli::Program program(
      "kbroker", "An in-memory Kafka-protocol broker on loopback, for demos and tests");
  kpipe::BrokerOptions o;
  auto& app = program.app();
  app.add_option("--brokers", o.brokers, "Number of brokers in the cluster")->default_val(1);
  app.add_option("--topic", o.topics, "Create a topic, NAME or NAME:PARTITIONS (repeatable)")
      ->type_name("NAME[:N]");
  app.add_option("--partitions", o.partitions, "Partitions of a --topic given without a count")
      ->default_val(4);
  app.add_option("--bootstrap-file", o.bootstrap_file,
                 "Also write the bootstrap list to FILE (atomically)")
      ->type_name("FILE");
  app.add_option("--control", o.control,
                 "Read fault commands from FIFO (made if missing; - for standard input), "
                 "answering each on standard output")
      ->type_name("FIFO");
  return program.run(argc, argv, [&](kpipe::Io& io) { return kpipe::run_broker(o, io); });
}
