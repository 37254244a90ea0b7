#include "kpipe/cli/cli.h"
#include "kpipe/programs/kproduce.h"

int main(int argc, char** argv) {
  kpipe::cli::Program program("kproduce", "NDJSON in, Kafka records out");
  kpipe::ProduceOptions o;
  auto& app = program.app();
  program.add_kafka(o.kafka);
  program.add_kinesis(o.kinesis);
  app.add_option("-t,--topic", o.topic,
                 "Topic to produce to, or kinesis:STREAM for a Kinesis stream")
      ->required();
  app.add_option("-k,--key", o.key, "Field path of the record key, e.g. .user_id")
      ->type_name("PATH");
  app.add_option("--explicit-hash-key", o.explicit_hash_key,
                 "Field path of a Kinesis record's explicit hash key, placing it in the shard "
                 "whose range holds it")
      ->type_name("PATH");
  app.add_option_function<int64_t>(
         "-p,--partition", [&](int64_t p) { o.partition = p; },
         "Produce every record to this partition")
      ->type_name("N");
  app.add_flag("--envelope", o.envelope,
               "Read kconsume envelopes: key, value, headers and timestamp");
  app.add_flag("--keep-partition", o.keep_partition,
               "With --envelope, keep each record's partition");
  app.add_flag("--transactional", o.transactional,
               "Produce in one transaction per checkpoint, committed with its offsets "
               "(exactly once; needs --state)");
  app.add_option("--transactional-id", o.transactional_id,
                 "The transactional id (default: from the topic and the state store)")
      ->type_name("ID");
  app.add_option("--state", o.state,
                 "With --transactional, the pipeline's state store, where checkpoints complete")
      ->type_name("STORE");
  program.add_schema(o.schema, true);
  program.add_inputs(o.input);
  program.add_errors(o.errors);
  program.add_stats(o.stats);
  return program.run(argc, argv, [&](kpipe::Io& io) { return kpipe::run_produce(o, io); });
}
