#include "kpipe/cli/cli.h"
#include "kpipe/programs/kdedup.h"

int main(int argc, char** argv) {
  kpipe::cli::Program program("kdedup", "Drop records already seen, by key, within a horizon");
  kpipe::DedupOptions o;
  auto& app = program.app();
  // One value per --key: `-k .id FILE` names an input, not a second key.
  app.add_option("-k,--key", o.keys, "Field path of the key (repeatable; default: the whole line)")
      ->allow_extra_args(false)
      ->type_name("PATH");
  app.add_option("--within", o.within,
                 "Remember a key for D after its record's time (default: for good)")
      ->type_name("D");
  app.add_option("--time", o.time,
                 "With --within, the event time's field (default: processing time)")
      ->type_name("PATH");
  app.add_option("--time-unit", o.time_unit, "Unit of numeric event times: s, ms, us or ns")
      ->default_val("ms")
      ->type_name("UNIT");
  app.add_option("--max-keys", o.max_keys, "Remember at most N keys, evicting the oldest first")
      ->default_val(kpipe::kDefaultMaxKeys)
      ->type_name("N");
  app.add_option("--dups", o.dups, "Write duplicates to FILE, or to the --dlq store with 'dlq'")
      ->type_name("FILE|dlq");
  app.add_flag("--exact", o.exact, "Remember full keys instead of 128-bit hashes");
  app.add_option("--state", o.state,
                 "The pipeline's state database: snapshot at checkpoints, restore on start")
      ->type_name("STORE");
  app.add_option("--name", o.name, "This stage's name in the state database (default: kdedup)")
      ->type_name("N");
  program.add_inputs(o.input);
  program.add_errors(o.errors);
  program.add_kafka(o.kafka);
  program.add_stats(o.stats);
  return program.run(argc, argv, [&](kpipe::Io& io) { return kpipe::run_dedup(o, io); });
}
