#include "kpipe/cli/cli.h"
#include "kpipe/programs/kconsume.h"

int main(int argc, char** argv) {
  kpipe::cli::Program program("kconsume", "Kafka records in, NDJSON envelopes out");
  kpipe::ConsumeOptions o;
  auto& app = program.app();
  program.add_kafka(o.kafka);
  program.add_kinesis(o.kinesis);
  app.add_option("-t,--topic", o.topics,
                 "Topic to consume (repeatable), or kinesis:STREAM for a Kinesis stream")
      ->required();
  app.add_option("--efo", o.efo,
                 "With kinesis:STREAM, read by enhanced fan-out as this consumer (registered if "
                 "new, and left registered)")
      ->type_name("CONSUMER");
  app.add_option("-g,--group", o.group, "Join this consumer group and commit what was written");
  app.add_option("--from", o.from,
                 "Where to start without a committed offset: earliest, latest, OFFSET, -N, @TIME")
      ->default_val("earliest")
      ->type_name("POS");
  app.add_option("--until", o.until,
                 "End each partition before OFFSET, or before its first record at or after @TIME")
      ->type_name("POS");
  app.add_option("--partitions", o.partitions, "Only these partitions, e.g. 0,2-5 (not with -g)")
      ->type_name("LIST");
  auto* count = app.add_option("-c,--count", o.count, "Exit after N records")->type_name("N");
  app.add_flag("-e,--exit", o.exit_at_end,
               "Exit once every assigned partition has reached its end");
  app.add_option("--format", o.format, "Output: envelope or value")
      ->default_val("envelope")
      ->type_name("FORMAT");
  app.add_option("--commit-interval", o.commit_interval,
                 "With -g, commit written offsets this often")
      ->default_val("1s")
      ->type_name("D");
  app.add_option("--isolation", o.isolation,
                 "read_committed (the default: no aborted or open transactions' records) or "
                 "read_uncommitted")
      ->type_name("LEVEL");
  app.add_flag(
      "--announce", o.announce,
      "Write control lines naming assigned partitions and those at their end (for kwindow)");
  app.add_option("--state", o.state,
                 "Emit checkpoints and resume from the pipeline's state database FILE")
      ->type_name("STORE");
  app.add_option("--checkpoint-interval", o.checkpoint_interval,
                 "With --state, emit a checkpoint this often")
      ->default_val("5s")
      ->type_name("D");
  app.add_option("--instance", o.instance,
                 "With -g and --state, this instance's name, stable across its restarts "
                 "(default: the host's name, or the first of HOST-2, HOST-3, ... free)")
      ->type_name("NAME");
  program.add_schema(o.schema, false);
  program.add_errors(o.errors);
  program.add_stats(o.stats);
  return program.run(argc, argv, [&](kpipe::Io& io) {
    o.count_given = count->count() > 0;
    return kpipe::run_consume(o, io);
  });
}
