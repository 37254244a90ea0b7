#include "kpipe/cli/cli.h"
#include "kpipe/programs/kupsert.h"

int main(int argc, char** argv) {
  kpipe::cli::Program program(
      "kupsert", "NDJSON objects in, rows upserted into an SQLite or PostgreSQL table by key");
  kpipe::UpsertOptions o;
  auto& app = program.app();
  app.add_option("--db", o.db,
                 "The database to write: an SQLite FILE (created when missing) or postgresql://...")
      ->required()
      ->type_name("FILE|URI");
  app.add_option("--table", o.table, "The table (created when missing)")
      ->required()
      ->type_name("NAME");
  // Split by run_upsert, not by CLI11, which drops empty names ("a,,b").
  app.add_option("--key", o.key, "The natural key: the table's primary key columns")
      ->required()
      ->allow_extra_args(false)  // one argument per --key: what follows is an input file
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("COL[,COL]");
  app.add_option("--mode", o.mode, "upsert (the last write wins) or ignore (the first write wins)")
      ->default_val("upsert")
      ->type_name("MODE");
  app.add_option("--columns", o.columns, "Only these fields, in this order")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("COL[,COL]");
  app.add_flag("--strict", o.strict,
               "A field that is not a column is bad input (default: add the column)");
  app.add_option("--batch", o.batch, "Commit at least every N rows (and every 500ms)")
      ->default_val(50000)
      ->type_name("N");
  app.add_option(
         "--state", o.state,
         "Complete checkpoints in the pipeline's state database (exactly-once if it is --db)")
      ->type_name("STORE");
  app.add_option("--name", o.name, "This stage's name in the state database")->type_name("NAME");
  program.add_inputs(o.input);
  program.add_errors(o.errors);
  program.add_kafka(o.kafka);
  program.add_stats(o.stats);
  return program.run(argc, argv, [&](kpipe::Io& io) { return kpipe::run_upsert(o, io); });
}
