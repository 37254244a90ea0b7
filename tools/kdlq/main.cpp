#include "kpipe/cli/cli.h"
#include "kpipe/programs/kdlq.h"

int main(int argc, char** argv) {
  kpipe::cli::Program program(
      "kdlq", "Dead letters: list, stats, replay, purge, and a guard that sends them");
  kpipe::DlqOptions o;
  program.app().require_subcommand(1);
  auto store = [&](CLI::App* sub) {
    sub->add_option(
           "--dlq", o.dlq,
           "Dead-letter store: FILE.db (SQLite), postgresql://..., kafka:TOPIC or kinesis:STREAM")
        ->type_name("TARGET")
        ->required();
    sub->add_option("--group", o.group,
                    "Replay group of a Kafka dead-letter topic, or replay ledger of a Kinesis "
                    "dead-letter stream in --state (default kdlq-replay.TOPIC or .STREAM)")
        ->type_name("GROUP");
    sub->add_option("--state", o.state,
                    "With kinesis:STREAM, where its replay position is kept: FILE.db or "
                    "postgresql://...")
        ->type_name("STORE");
    program.add_kafka(*sub, o.kafka);
    program.add_kinesis(*sub, o.kinesis);
  };
  auto filters = [&](CLI::App* sub) {
    sub->add_option("--reason", o.reason, "Only entries whose reason contains TEXT")
        ->type_name("TEXT");
    sub->add_option("--stage", o.stage, "Only entries of this stage (PROGRAM or PROGRAM/NAME)")
        ->type_name("S");
    sub->add_option("--source-topic", o.source_topic, "Only entries read from this topic")
        ->type_name("T");
    sub->add_option("--since", o.since,
                    "Only entries written at or after T (RFC 3339, epoch ms, -D)")
        ->type_name("T");
    sub->add_option("--until", o.until, "Only entries written before T")->type_name("T");
    sub->add_option("--limit", o.limit, "At most N entries")->type_name("N");
    sub->add_option("--format", o.format, "table or ndjson (default: table on a terminal)")
        ->type_name("FORMAT");
  };
  auto* list = program.add_subcommand("list", "Show dead letters, oldest first");
  store(list);
  filters(list);
  auto* stats =
      program.add_subcommand("stats", "Count dead letters by reason, stage, source topic or hour");
  store(stats);
  filters(stats);
  stats->add_option("--by", o.by, "Group by reason, stage, topic or hour")
      ->default_val("reason")
      ->type_name("KEY");
  auto* replay =
      program.add_subcommand("replay", "Send pending entries' original lines to stdout or a topic");
  store(replay);
  filters(replay);
  replay
      ->add_option("--to", o.to,
                   "Produce to kafka:TOPIC or kinesis:STREAM instead of writing to standard output")
      ->type_name("TARGET");
  replay->add_flag("--dry-run", o.dry_run, "Show what would be replayed; send and mark nothing");
  replay->add_flag("--again", o.again, "Include entries already replayed");
  replay->add_option("--batch", o.batch, "With --to, entries in flight at most")
      ->default_val(1000)
      ->type_name("N");
  auto* purge = program.add_subcommand("purge", "Delete replayed or old entries");
  store(purge);
  purge->add_flag("--replayed", o.replayed, "Entries already replayed");
  purge->add_option("--older-than", o.older_than, "Entries written more than D ago")
      ->type_name("D");
  purge->add_flag("--dry-run", o.dry_run, "Count what would be purged; delete nothing");
  auto* guard = program.add_subcommand(
      "guard", "Pass records holding the required fields; send the rest to --dlq");
  guard
      ->add_option("--require", o.require,
                   "A field that must be present, of TYPE if given (repeatable)")
      ->type_name("PATH[:TYPE]")
      ->required()
      ->allow_extra_args(false);  // `--require .a FILE`: FILE is an input
  guard->add_option("--name", o.name, "Stage name in the store (kdlq-guard/NAME)")
      ->type_name("NAME");
  program.add_inputs(*guard, o.input);
  program.add_errors(*guard, o.errors);
  program.add_stats(*guard, o.stats);
  program.add_kafka(*guard, o.kafka);
  program.add_kinesis(*guard, o.kinesis);
  return program.run(argc, argv, [&](kpipe::Io& io) {
    if (list->parsed()) return kpipe::run_dlq_list(o, io);
    if (stats->parsed()) return kpipe::run_dlq_stats(o, io);
    if (replay->parsed()) return kpipe::run_dlq_replay(o, io);
    if (purge->parsed()) return kpipe::run_dlq_purge(o, io);
    o.on_error_given = guard->get_option("--on-error")->count() > 0;
    return kpipe::run_dlq_guard(o, io);
  });
}
