#include "kpipe/cli/cli.h"
#include "kpipe/programs/kproduce.h"

int main(int argc, char** argv) {
  kpipe::cli::Program program("kproduce", "NDJSON in, Kafka records out");
  kpipe::ProduceOptions o;
  auto& app = program.app();
  program.add_kafka(o.kafka);
  app.add_option("-t,--topic", o.topic, "Topic to produce to")->required();
  app.add_option("-k,--key", o.key, "Field path of the record key, e.g. .user_id")
      ->type_name("PATH");
  app.add_option_function<int64_t>(
         "-p,--partition", [&](int64_t p) { o.partition = p; },
         "Produce every record to this partition")
      ->type_name("N");
  app.add_flag("--envelope", o.envelope,
               "Read kconsume envelopes: key, value, headers and timestamp");
  app.add_flag("--keep-partition", o.keep_partition,
               "With --envelope, keep each record's partition");
  program.add_inputs(o.input);
  program.add_errors(o.errors);
  program.add_stats(o.stats);
  return program.run(argc, argv, [&](kpipe::Io& io) { return kpipe::run_produce(o, io); });
}
