#include "kpipe/cli/cli.h"
#include "kpipe/programs/klag.h"

int main(int argc, char** argv) {
  kpipe::cli::Program program(
      "klag", "Consumer lag per partition, in records and in seconds, with history and alerts");
  kpipe::LagOptions o;
  auto& app = program.app();
  CLI::App* status =
      program.add_subcommand("status", "Judge the samples of --history by Burrow's rules");
  status->callback([&o] { o.status_only = true; });
  // Options both forms take; only the sampling form asks a broker.
  for (CLI::App* a : {&app, status}) {
    a->add_option("-g,--group", o.groups,
                  "Consumer group, or a regular expression its whole name matches (repeatable)")
        ->type_name("GROUP");
    a->add_flag("--all-groups", o.all_groups, "Every consumer group the cluster lists");
    a->add_option("--state", o.state, "A kpipe pipeline's state database instead of a group")
        ->type_name("STORE");
    a->add_option("--history", o.history, "SQLite file of samples: each run appends one")
        ->type_name("FILE");
    a->add_option("--format", o.format,
                  "table, ndjson or prometheus (default: table on a terminal)")
        ->type_name("FORMAT");
    a->add_option("--granularity", o.granularity,
                  "partition, or topic: a row per group and topic, its partitions summed")
        // Shown, not set: not given, --plot draws a series per group.
        ->default_str("partition")
        ->type_name("G");
    a->add_option("--metric-names", o.metric_names,
                  "kpipe, or kafka_exporter: its metric names for --format prometheus")
        ->default_val("kpipe")
        ->type_name("NAMES");
    a->add_option("--window", o.window, "Samples judged by the status rules")
        ->default_val(10)
        ->type_name("N");
    a->add_option("--allowed-lag", o.allowed_lag, "A lag up to N is OK whatever its trend")
        ->default_val(0)
        ->type_name("N");
    a->add_option("--max-lag", o.max_lag, "Exit 3 when a group's total lag is over N")
        ->type_name("N");
    a->add_option("--max-lag-seconds", o.max_lag_seconds,
                  "Exit 3 when a partition is more than S seconds behind")
        ->type_name("S");
    a->add_option("--fail-on", o.fail_on,
                  "Exit 3 when a group's status is this or worse: WARN, STALL, STOP, REWIND")
        ->type_name("STATUS");
    program.add_plot(*a, o.plot, "the lag over the whole history");
  }
  program.add_kafka(o.kafka);
  program.add_kinesis(o.kinesis);
  app.add_option("-t,--topic", o.topics,
                 "Only this topic (repeatable; default: every topic the group consumes), or "
                 "kinesis:NAME, a Kinesis stream's shards with --state")
      ->type_name("TOPIC");
  app.add_option("--uncommitted", o.uncommitted,
                 "A partition without a committed offset counts from: earliest (its log start), "
                 "latest (no lag) or ignore")
      ->default_val("earliest")
      ->type_name("MODE");
  app.add_flag("--no-fetch", o.no_fetch,
               "Estimate lag seconds from --history instead of reading one record each");
  app.add_option("--watch", o.watch, "Sample again every D until interrupted")->type_name("D");
  app.add_option("--keep", o.keep, "Drop history samples older than D")
      ->default_val("7d")
      ->type_name("D");
  return program.run(argc, argv, [&](kpipe::Io& io) { return kpipe::run_lag(o, io); });
}
