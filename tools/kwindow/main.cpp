#include "kpipe/cli/cli.h"
#include "kpipe/programs/kwindow.h"

int main(int argc, char** argv) {
  kpipe::cli::Program program(
      "kwindow", "Event-time windows over NDJSON: tumbling, sliding or session, per key");
  kpipe::WindowOptions o;
  auto& app = program.app();
  app.add_option("--time", o.time, "Field path of the event time (epoch number or RFC 3339)")
      ->required()
      ->type_name("PATH");
  app.add_option("--time-unit", o.time_unit, "Unit of numeric times: s, ms, us or ns")
      ->default_val("ms")
      ->type_name("UNIT");
  app.add_option("-k,--key", o.keys, "Field path of the grouping key (repeatable; none: one group)")
      ->type_name("PATH")
      ->allow_extra_args(false);
  app.add_option("--tumble", o.tumble, "Tumbling windows of SIZE")->type_name("SIZE");
  app.add_option("--slide", o.slide, "Sliding windows of SIZE, with --every")->type_name("SIZE");
  app.add_option("--every", o.every, "With --slide, a window starts every STEP")->type_name("STEP");
  app.add_option("--session", o.session, "Session windows that close after GAP without a record")
      ->type_name("GAP");
  app.add_option(
         "--agg", o.aggs,
         "Aggregate (repeatable, default count): count, sum:PATH, min:PATH, max:PATH, avg:PATH, "
         "distinct:PATH, or NAME=SPEC")
      ->type_name("SPEC")
      ->allow_extra_args(false);
  app.add_option("--watermark", o.watermark,
                 "Bounded out-of-orderness: the watermark trails event time by D")
      ->default_val("0s")
      ->type_name("D");
  app.add_option("--allowed-lateness", o.allowed_lateness,
                 "Keep fired windows D longer for late records")
      ->default_val("0s")
      ->type_name("D");
  app.add_option("--late", o.late,
                 "Where records too late for every window go: FILE, or dlq (see --dlq)")
      ->type_name("FILE|dlq");
  app.add_option("--time-format", o.time_format, "window_start and window_end as rfc3339 or ms")
      ->default_val("rfc3339")
      ->type_name("FORMAT");
  app.add_option("--idle-timeout", o.idle_timeout,
                 "A partition silent for D stops holding the watermark back")
      ->type_name("D");
  app.add_option("--state", o.state, "Checkpoint state database (shared by the pipeline's stages)")
      ->type_name("STORE");
  app.add_option("--name", o.name, "This stage's name in the state database (default: kwindow)")
      ->type_name("N");
  app.add_flag("--flush-at-end", o.flush_at_end,
               "With --state, fire the open windows at end of input too");
  program.add_inputs(o.input);
  program.add_errors(o.errors);
  program.add_kafka(o.kafka);
  program.add_stats(o.stats);
  return program.run(argc, argv, [&](kpipe::Io& io) { return kpipe::run_window(o, io); });
}
