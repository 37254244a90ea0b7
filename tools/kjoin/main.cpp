#include "kpipe/cli/cli.h"
#include "kpipe/programs/kjoin.h"

int main(int argc, char** argv) {
  kpipe::cli::Program program("kjoin", "Enrich a stream with a table: lookup and event-time joins");
  kpipe::JoinOptions o;
  auto& app = program.app();
  app.add_option("--table", o.table,
                 "The table: kafka:TOPIC, kinesis:STREAM, FILE.ndjson, sqlite:FILE:TABLE or "
                 "postgresql://...#TABLE")
      ->required()
      ->type_name("SOURCE");
  // One value per option: `--key .id FILE` names an input, not a second key.
  app.add_option("--table-key", o.table_keys,
                 "The table's key: a field path of FILE rows, a COLUMN of SQL tables (repeatable)")
      ->allow_extra_args(false)
      ->type_name("PATH");
  app.add_option("-k,--key", o.keys, "Field path of the stream's key (repeatable)")
      ->allow_extra_args(false)
      ->type_name("PATH");
  app.add_option("--as", o.as, "Where the row goes in the output line (.value.user)")
      ->type_name("PATH");
  app.add_option("--on-miss", o.on_miss,
                 "A record whose key has no row: keep it (row null), drop it, or dlq")
      ->default_val("keep")
      ->type_name("ACTION");
  app.add_option("--as-of", o.as_of, "Event-time join: the row valid at the record's time at PATH")
      ->type_name("PATH");
  app.add_option("--table-time", o.table_time,
                 "With --as-of, the time of each table version (default for kafka: .timestamp)")
      ->type_name("PATH");
  app.add_option("--time-unit", o.time_unit, "Unit of numeric event times: s, ms, us or ns")
      ->default_val("ms")
      ->type_name("UNIT");
  app.add_option("--table-watermark", o.table_watermark,
                 "Table records may arrive D out of order (--as-of)")
      ->default_val("0s")
      ->type_name("D");
  app.add_option("--idle-timeout", o.idle_timeout,
                 "A table partition silent for D stops holding records back (--as-of)")
      ->type_name("D");
  app.add_option("--watermark", o.watermark,
                 "Stream records may arrive D out of order: versions are kept for them (--as-of)")
      ->default_val("0s")
      ->type_name("D");
  app.add_option("--refresh", o.refresh, "Read an SQL table again every D (default: once)")
      ->type_name("D");
  app.add_option("--state", o.state,
                 "The pipeline's state database: snapshot at checkpoints, restore on start")
      ->type_name("STORE");
  app.add_option("--name", o.name, "This stage's name in the state database (default: kjoin)")
      ->type_name("N");
  program.add_inputs(o.input);
  program.add_errors(o.errors);
  program.add_kafka(o.kafka);
  program.add_kinesis(o.kinesis);
  program.add_stats(o.stats);
  return program.run(argc, argv, [&](kpipe::Io& io) { return kpipe::run_join(o, io); });
}
