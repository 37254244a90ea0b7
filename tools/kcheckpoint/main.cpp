#include "kpipe/cli/cli.h"
#include "kpipe/programs/kcheckpoint.h"

int main(int argc, char** argv) {
  kpipe::cli::Program program(
      "kcheckpoint", "The pipeline's offsets and checkpoints, kept in SQLite or PostgreSQL");
  kpipe::CheckpointOptions o;
  std::function<kpipe::Status(const kpipe::CheckpointOptions&, kpipe::Io&)> run;
  auto sub = [&](const char* name, const char* help, auto fn) {
    CLI::App* app = program.add_subcommand(name, help);
    app->add_option("--state", o.state, "The pipeline's state database")
        ->required()
        ->type_name("STORE");
    app->callback([&run, fn] { run = fn; });
    return app;
  };
  auto format = [&](CLI::App* app) {
    app->add_option("--format", o.format, "table or ndjson (default: table on a terminal)")
        ->type_name("FORMAT");
  };
  CLI::App* commit = sub("commit", "The terminal stage: complete each checkpoint that arrives",
                         kpipe::run_checkpoint_commit);
  commit->add_flag("--passthrough", o.passthrough, "Write the data lines to standard output");
  CLI::Option* each =
      commit
          ->add_option("--each", o.each, "Run COMMAND once per checkpoint with its lines on stdin")
          ->type_name("COMMAND");
  commit->add_option("--name", o.name, "This stage's name in the state database")
      ->type_name("NAME");
  commit
      ->add_option("--checkpoint-interval", o.checkpoint_interval,
                   "kconsume's interval, to notice silence")
      ->default_val("5s")
      ->type_name("D");
  program.add_inputs(*commit, o.input);
  program.add_stats(*commit, o.stats);
  format(sub("show", "The offsets the pipeline resumes from", kpipe::run_checkpoint_show));
  CLI::App* history =
      sub("history", "The checkpoints: how long each took, and its snapshots' sizes",
          kpipe::run_checkpoint_history);
  format(history);
  program.add_plot(*history, o.plot, "the checkpoints' durations and latency");
  CLI::App* reset =
      sub("reset", "Move the pipeline's offsets, as kafka-consumer-groups --reset-offsets does",
          kpipe::run_checkpoint_reset);
  reset->add_flag("--to-earliest", o.to_earliest, "Reset to the log start");
  reset->add_flag("--to-latest", o.to_latest, "Reset to the log end");
  reset->add_option("--to-datetime", o.to_datetime, "Reset to the first record at or after T")
      ->type_name("T");
  reset->add_option("--by-duration", o.by_duration, "Reset to the first record D before now")
      ->type_name("D");
  reset->add_option("--shift-by", o.shift_by, "Move each offset by N (negative: back)")
      ->type_name("N");
  reset->add_option("--to-offset", o.to_offset, "Reset to offset N")->type_name("N");
  reset
      ->add_option("-t,--topic", o.topics,
                   "Only TOPIC, or TOPIC:PARTITIONS like events:0,2-5; kinesis:NAME[:SHARDS], "
                   "a Kinesis stream's shards")
      ->type_name("TOPIC");
  reset->add_flag("--dry-run", o.dry_run, "Print the plan only (the default)");
  reset->add_flag("--execute", o.execute, "Apply the plan");
  format(reset);
  program.add_kafka(*reset, o.kafka);
  program.add_kinesis(*reset, o.kinesis);
  sub("export", "The offsets as NDJSON, for import", kpipe::run_checkpoint_export);
  program.add_inputs(
      *sub("import", "Set offsets from NDJSON lines of export", kpipe::run_checkpoint_import),
      o.input);
  CLI::App* sync = sub("sync", "Copy offsets between the state and a Kafka consumer group",
                       kpipe::run_checkpoint_sync);
  sync->add_option("--to-group", o.to_group, "Commit the state's offsets to GROUP")
      ->type_name("GROUP");
  sync->add_option("--from-group", o.from_group, "Set the state's offsets from GROUP's")
      ->type_name("GROUP");
  sync->add_option("-t,--topic", o.topics, "With --from-group: topics to copy")->type_name("TOPIC");
  program.add_kafka(*sync, o.kafka);
  sub("verify", "Check the database and the protocol's invariants", kpipe::run_checkpoint_verify);
  program.app().require_subcommand(1);
  return program.run(argc, argv, [&](kpipe::Io& io) {
    o.each_given = each->count() > 0;
    return run(o, io);
  });
}
