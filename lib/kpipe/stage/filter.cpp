#include "kpipe/stage/filter.h"

#include "kpipe/json.h"

namespace kpipe {

Status ParsingStage::on_line(const Line& line, Output& out) {
  const FieldSet& f = *fields();
  parsed_.status = reader_.read(line.text, f, values_);
  parsed_.values = values_.data();
  parsed_.root_type = reader_.root_type();
  return on_parsed(line, parsed_, out);
}

Status run_filter(LineStage& stage, const FilterSettings& settings, BadInputHandler& bad, Io& io) {
  auto outputs = settings.outputs;
  outputs.emplace_back("standard output", &io.out);
  KPIPE_TRY(check_inputs_are_not_outputs(settings.input.inputs, outputs));
  LineFeed inputs(settings.input.inputs, settings.input.max_line_bytes, stage.fields());
  Output& out = io.out;
  Counters counters;
  StatsTicker ticker(io.program, settings.stats, io.reporter, io.clock);
  auto fill = [&] {
    stage.fill_counters(counters);
    counters.dead_lettered = bad.dead_lettered();
    counters.skipped = bad.skipped();
  };
  bool ticking = ticker.ticking();
  // Flush before waiting for input: a downstream consumer sees every line
  // that precedes a pause in the input (kpipe(7), LINES): what a stage holds
  // back too (before_wait). The ticker looks at the clock here too, since
  // tick() does so only every 1024 records: a slow input would otherwise
  // get one --stats line per 1024 records instead of one per interval.
  Status waiting;  // the first error of before_wait, reported by the loop
  inputs.set_before_wait([&] {
    if (waiting.ok()) waiting = stage.before_wait(out);
    (void)out.flush();
    if (!ticking) return;
    fill();
    ticker.tick_now(counters);
  });
  inputs.set_stop_check([&] {
    return (io.stop != nullptr && io.stop->load(std::memory_order_relaxed)) || out.closed();
  });
  inputs.set_idle_hook(static_cast<int>(stage.idle_interval()), [&]() -> Status {
    KPIPE_TRY(stage.on_idle(out));
    KPIPE_TRY(bad.sync());
    fill();
    ticker.tick_now(counters);
    KPIPE_TRY(out.flush());
    out.check_closed();
    return {};
  });

  Line line;
  const ParsedLine* parsed = nullptr;
  for (;;) {
    if (io.stop != nullptr && io.stop->load(std::memory_order_relaxed)) break;
    if (out.closed()) break;
    // Dead letters become durable within a moment even when good lines
    // keep coming and no checkpoint or pause would sync them.
    KPIPE_TRY(bad.tick());
    auto more = inputs.next(line, parsed);
    if (!waiting.ok()) return waiting;
    if (!more) {
      // An input that cannot be read ends the run, but the lines before
      // it were read: what the stage holds back of them is written first.
      if (waiting = stage.before_wait(out); waiting.ok()) (void)out.flush();
      return more.take_error();
    }
    if (!*more) break;
    // Empty lines, and lines of blanks only, are not records (kpipe(7), LINES).
    if (is_blank_line(line.text)) continue;
    if (is_control_line(line.text)) {
      // Dead letters become durable before a checkpoint can pass them.
      KPIPE_TRY(bad.sync());
      KPIPE_TRY(stage.on_control(line, out));
      KPIPE_TRY(out.flush());
      continue;
    }
    ++counters.in;
    if (line.too_long) {
      KPIPE_TRY(bad.handle(std::string(line.input), line,
                           fmt::format("line is longer than {} bytes (--max-line-bytes)",
                                       settings.input.max_line_bytes)));
      continue;
    }
    Status s = parsed != nullptr ? stage.on_parsed(line, *parsed, out) : stage.on_line(line, out);
    if (!s.ok()) {
      // A stage that holds lines may report one of them (already handled)
      // while it reads another.
      if (s.error().status != ExitStatus::kDataError || bad.failed()) return s;
      KPIPE_TRY(bad.handle(std::string(line.input), line, s.error().message));
    }
    KPIPE_TRY(out.end_record());
    if (ticking && ticker.due()) {
      fill();
      ticker.tick_now(counters);
    }
  }
  if (!out.closed()) KPIPE_TRY(stage.on_end(out));
  KPIPE_TRY(bad.sync());
  KPIPE_TRY(out.flush());
  fill();
  ticker.finish(counters);
  std::string summary = bad.summary();
  if (!summary.empty()) io.reporter.warning(summary);
  return {};
}

}  // namespace kpipe
