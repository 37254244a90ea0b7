#include "kpipe/programs/kwindow.h"

#include <optional>

#include "kpipe/choices.h"
#include "kpipe/control.h"
#include "kpipe/event_time.h"
#include "kpipe/json.h"
#include "kpipe/programs/dlq_targets.h"
#include "kpipe/programs/stage_state.h"
#include "kpipe/stage/stateful.h"
#include "kpipe/store/sql.h"

namespace kpipe {

namespace {

Expected<Millis> option_duration(const char* option, const std::string& text) {
  auto d = parse_duration(text);
  if (!d) return usage_error("{}: {}", option, d.error().message);
  return *d;
}

// What the stage reads from each line: one FieldSet, compiled once.
struct Paths {
  FieldSet fields;
  size_t time = 0;
  std::vector<size_t> keys;
  std::vector<int> aggs;      // per aggregate: its slot, -1 for count
  std::vector<bool> numeric;  // per aggregate: reads only numbers (sum, avg)
  size_t partition = 0;
  size_t topic = 0;
};

Expected<Paths> compile_paths(const WindowOptions& o, const WindowConfig& config) {
  Paths p;
  auto add = [&](const std::string& text) -> Expected<size_t> {
    auto path = FieldPath::parse(text);
    if (!path) return path.take_error();
    return p.fields.add(*path);
  };
  auto time = add(o.time);
  if (!time) return time.take_error();
  p.time = *time;
  for (const std::string& k : o.keys) {
    auto slot = add(k);
    if (!slot) return slot.take_error();
    p.keys.push_back(*slot);
  }
  for (const AggSpec& a : config.aggs) {
    p.numeric.push_back(a.fn == AggFn::kSum || a.fn == AggFn::kAvg);
    if (a.fn == AggFn::kCount) {
      p.aggs.push_back(-1);
      continue;
    }
    auto slot = add(a.path);
    if (!slot) return slot.take_error();
    p.aggs.push_back(static_cast<int>(*slot));
  }
  // Envelopes say where a record came from: each partition gets its own
  // watermark.
  p.partition = *add(".partition");
  p.topic = *add(".topic");
  return p;
}

// What a key split between partitions does to windows kept per partition.
constexpr std::string_view kSplitWindows =
    "an instance keeps its windows per partition, so each counts its own share of the key";

class WindowStage final : public ParsingStage {
 public:
  WindowStage(const WindowOptions& options, WindowEngine& engine, Paths paths, TimeUnit unit,
              BadInputHandler& bad, Output* late_out, StageState& state, Reporter& reporter)
      : options_(options),
        single_(engine),
        reporter_(reporter),
        paths_(std::move(paths)),
        unit_(unit),
        bad_(bad),
        late_out_(late_out),
        state_(state),
        inputs_(paths_.aggs.size(), nullptr) {
    // The store's check sees the keys of every instance's partitions.
    state_.on_key_split = [this](const KeySplit& split) {
      if (warned_) return;
      warned_ = true;
      reporter_.warning(
          copartition_warning(split.key, split.recorded, split.seen, kSplitWindows, options_.keys));
    };
  }

  // The engine's hash tables are far larger than the caches, so a record's
  // first touch of its window's table stalls on memory. To overlap that
  // with reading the next line, a record placed in tumbling or sliding
  // windows is held back: checked now, its memory prefetched, and given to
  // the engine at the next line (or control line, idle tick, end), before
  // anything else happens. Its placement, decided against the same
  // watermark, is known now, so a record too late still meets --late while
  // its line is at hand.
  const FieldSet* fields() const override { return &paths_.fields; }

  Status on_parsed(const Line& line, const ParsedLine& parsed, Output& out) override {
    WindowInput in;
    WindowEngine* engine = &single_;
    Status read = read_record(parsed, in, engine);
    if (!read.ok()) {
      // What came before a bad line is out before its diagnostic.
      KPIPE_TRY(release(out));
      return read;
    }
    KPIPE_TRY(release(out));
    if (state_.sliced() && !warned_) check_copartitioned(*engine, in);
    std::optional<Placement> placed = engine->placement(in);
    if (placed && *placed != Placement::kTooLate) {
      hold(in, engine);
      return {};
    }
    auto added = engine->add(in, out.buffer());
    if (!added) return added.take_error();
    if (*added == Placement::kTooLate) return too_late(line, *engine);
    return {};
  }

  // A checkpoint saves what changed since the previous one, then passes
  // on: the state saved is that of every record before the line.
  Status on_control(const Line& line, Output& out) override {
    KPIPE_TRY(release(out));
    KPIPE_TRY(flush_late());
    auto event = parse_partition_event(line.text);
    if (!event)
      return data_error("{}: line {}: {}", line.input, line.number, event.error().message);
    KPIPE_TRY(state_.on_control(line));
    if (*event && state_.sliced()) {
      // An instance's partition has an engine of its own, whose watermark
      // is the partition's: it waits for that partition alone (kpipe(7),
      // MANY INSTANCES). A revoked partition's engine is gone, its open
      // windows saved for the next owner.
      if ((*event)->kind == PartitionEvent::Kind::kAssigned) {
        for (const auto& tp : (*event)->partitions) {
          auto* engine = static_cast<WindowEngine*>(state_.engine_for(tp.topic, tp.partition));
          if (engine != nullptr) engine->partition_assigned(tp.topic, tp.partition, out.buffer());
        }
      }
    } else if (*event) {
      for (const auto& tp : (*event)->partitions) {
        if ((*event)->kind == PartitionEvent::Kind::kAssigned) {
          single_.partition_assigned(tp.topic, tp.partition, out.buffer());
        } else {
          single_.partition_revoked(tp.topic, tp.partition, out.buffer());
        }
      }
    }
    out.write_line(line.text);
    return {};
  }

  Status on_idle(Output& out) override {
    KPIPE_TRY(release(out));
    single_.on_idle(out.buffer());
    state_.for_each_slice([&](const TopicPartition&, Snapshottable& e) {
      static_cast<WindowEngine&>(e).on_idle(out.buffer());
    });
    return flush_late();
  }

  // With --state, windows still open stay in the state saved at the last
  // checkpoint, for the next run, unless --flush-at-end.
  Status on_end(Output& out) override {
    KPIPE_TRY(release(out));
    if (!state_.enabled() || options_.flush_at_end) {
      single_.flush(out.buffer());
      state_.for_each_slice([&](const TopicPartition&, Snapshottable& e) {
        static_cast<WindowEngine&>(e).flush(out.buffer());
      });
    }
    return flush_late();
  }

  void fill_counters(Counters& c) const override {
    c.out = emitted_gone_ + single_.emitted();
    c.state_size = single_.states();
    // The stage's watermark is its slowest partition's, in an instance.
    auto watermark = [&](const WindowEngine& e) {
      Millis w = e.watermark();
      if (w != kNoWatermark && (!c.watermark || w < *c.watermark)) c.watermark = w;
    };
    c.watermark.reset();
    if (state_.slice_count() == 0) watermark(single_);
    state_.for_each_slice([&](const TopicPartition&, Snapshottable& e) {
      c.out += static_cast<WindowEngine&>(e).emitted();
      c.state_size += static_cast<WindowEngine&>(e).states();
      watermark(static_cast<WindowEngine&>(e));
    });
    c.late = late_;
    c.dropped = dropped_;
    state_.meter.fill(c);
  }

  // Lines the engines of revoked partitions had written.
  void partition_dropped(const WindowEngine& engine) { emitted_gone_ += engine.emitted(); }

  uint64_t late() const { return late_; }
  uint64_t dropped() const { return dropped_; }

 private:
  // A record held back by on_line, with copies of what its views point to.
  struct Held {
    bool active = false;
    WindowEngine* engine = nullptr;
    WindowInput in;
    std::string key;
    std::string topic;
    std::vector<JsonField> fields;
    std::vector<std::string> texts;  // per aggregate: raw, then str
    std::vector<const JsonField*> inputs;
  };

  // Reads the line into `in`; a data_error for bad input.
  Status read_record(const ParsedLine& parsed, WindowInput& in, WindowEngine*& engine) {
    if (!parsed.status.ok()) return parsed.status;
    values_ = parsed.values;
    // kwindow's own words for a time of another type, older than the
    // shared reader's.
    static constexpr TimeFieldWording kWording{.expected = "a number or an RFC 3339 string"};
    auto time = read_event_time(values_[paths_.time], paths_.fields.path(paths_.time).text(), unit_,
                                kWording);
    if (!time) return time.take_error();
    in.time = *time;
    if (!paths_.keys.empty()) {
      auto key = encode_key(paths_.fields, paths_.keys, values_, key_);
      if (!key) return key.take_error();
      in.key = *key;
    }
    for (size_t a = 0; a < inputs_.size(); ++a)
      inputs_[a] = paths_.aggs[a] < 0 ? nullptr : &values_[static_cast<size_t>(paths_.aggs[a])];
    in.aggs = inputs_.data();
    const JsonField& partition = values_[paths_.partition];
    if (partition.type == JsonType::kNumber && partition.is_integer) {
      in.partition = partition.integer;
      const JsonField& topic = values_[paths_.topic];
      if (topic.type == JsonType::kString) in.topic = topic.str;
    }
    if (state_.sliced()) {
      // An instance's record goes to its partition's engine.
      auto found = state_.engine_of(values_[paths_.topic], partition, "windows");
      if (!found) return found.take_error();
      engine = static_cast<WindowEngine*>(*found);
    }
    KPIPE_TRY(engine->check(in));
    if (state_.sliced()) state_.sample_key(key_sample_hash(in.key), in.key);
    return {};
  }

  // Windows are kept per partition: exact only when every record of a key
  // comes from one partition (kpipe(7), MANY INSTANCES). A key whose
  // window another of this instance's partitions holds says the topic is
  // not keyed by it; once is enough to say so. One record in
  // kCopartitionSample is looked for in one other partition.
  void check_copartitioned(const WindowEngine& engine, const WindowInput& in) {
    if (++sampled_ % kCopartitionSample != 0) return;
    auto [other, other_engine] = state_.other_slice(&engine);
    if (other == nullptr || !static_cast<WindowEngine*>(other_engine)->holds_key(in)) return;
    warned_ = true;
    reporter_.warning(copartition_warning(
        in.key, *other, {std::string(in.topic), static_cast<int32_t>(in.partition)}, kSplitWindows,
        options_.keys));
  }

  void hold(const WindowInput& in, WindowEngine* engine) {
    Held& h = held_;
    h.active = true;
    h.engine = engine;
    h.in = in;
    h.key.assign(in.key);
    h.in.key = h.key;
    if (h.topic != in.topic) h.topic.assign(in.topic);
    h.in.topic = h.topic;
    size_t n = inputs_.size();
    h.fields.resize(n);
    h.texts.resize(2 * n);
    h.inputs.assign(n, nullptr);
    for (size_t a = 0; a < n; ++a) {
      if (in.aggs[a] == nullptr) continue;
      JsonField& f = h.fields[a] = *in.aggs[a];
      h.inputs[a] = &f;
      // sum and avg read numbers only, and the text of one that may be an
      // integer beyond 64 bits; the others need the text too.
      if (paths_.numeric[a] && !sum_reads_text(f)) {
        f.raw = f.str = std::string_view();
        continue;
      }
      f.raw = h.texts[2 * a].assign(f.raw);
      f.str = h.texts[2 * a + 1].assign(f.str);
    }
    h.in.aggs = h.inputs.data();
  }

  Status release(Output& out) {
    if (!held_.active) return {};
    held_.active = false;
    auto added = held_.engine->add(held_.in, out.buffer());
    return added.ok() ? Status() : Status(added.take_error());
  }

  Status too_late(const Line& line, const WindowEngine& engine) {
    ++late_;
    if (late_out_ != nullptr) {
      late_out_->write_line(line.text);
      return late_out_->end_record();
    }
    if (options_.late == "dlq") {
      std::string reason = "too late for every window: the watermark is ";
      append_rfc3339(reason, engine.watermark());
      return bad_.dead_letter(std::string(line.input), line, reason);
    }
    ++dropped_;
    return {};
  }

  Status flush_late() { return late_out_ != nullptr ? late_out_->flush() : Status(); }

  const WindowOptions& options_;
  WindowEngine& single_;  // a single pipeline's (an instance's are in state_)
  Reporter& reporter_;
  bool warned_ = false;
  uint64_t sampled_ = 0;
  uint64_t emitted_gone_ = 0;
  Paths paths_;
  TimeUnit unit_;
  BadInputHandler& bad_;
  Output* late_out_;
  StageState& state_;
  const JsonField* values_ = nullptr;  // the line's, during on_parsed
  std::vector<const JsonField*> inputs_;
  std::string key_;  // the record's key, when not a view into its line
  Held held_;
  uint64_t late_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace

Expected<WindowConfig> window_config(const WindowOptions& o) {
  WindowConfig c;
  int kinds = !o.tumble.empty() + !o.slide.empty() + !o.session.empty();
  if (kinds == 0)
    return usage_error("give one of --tumble SIZE, --slide SIZE --every STEP or --session GAP");
  if (kinds > 1) return usage_error("--tumble, --slide and --session are alternatives: give one");
  if (!o.slide.empty() && o.every.empty()) return usage_error("--slide needs --every STEP");
  if (o.slide.empty() && !o.every.empty()) return usage_error("--every goes with --slide");
  if (!o.tumble.empty()) {
    c.shape.kind = WindowKind::kTumble;
    auto d = option_duration("--tumble", o.tumble);
    if (!d) return d.take_error();
    c.shape.size = *d;
  } else if (!o.slide.empty()) {
    c.shape.kind = WindowKind::kSlide;
    auto d = option_duration("--slide", o.slide);
    if (!d) return d.take_error();
    c.shape.size = *d;
    auto e = option_duration("--every", o.every);
    if (!e) return e.take_error();
    c.shape.every = *e;
  } else {
    c.shape.kind = WindowKind::kSession;
    auto d = option_duration("--session", o.session);
    if (!d) return d.take_error();
    c.shape.size = *d;
  }
  auto w = option_duration("--watermark", o.watermark);
  if (!w) return w.take_error();
  c.watermark_delay = *w;
  auto l = option_duration("--allowed-lateness", o.allowed_lateness);
  if (!l) return l.take_error();
  c.allowed_lateness = *l;
  if (!o.idle_timeout.empty()) {
    auto i = option_duration("--idle-timeout", o.idle_timeout);
    if (!i) return i.take_error();
    if (*i <= 0) return usage_error("--idle-timeout: the duration must be positive");
    c.idle_timeout = *i;
  }
  std::vector<std::string> specs = o.aggs;
  if (specs.empty()) specs.push_back("count");
  for (const std::string& s : specs) {
    auto a = parse_agg_spec(s);
    if (!a) return a.take_error();
    c.aggs.push_back(std::move(*a));
  }
  c.keys = o.keys;
  c.time_path = o.time;
  auto format = parse_choice("time format", o.time_format, {"rfc3339", "ms"});
  if (!format) return format.take_error();
  c.time_format = *format == 0 ? TimeFormat::kRfc3339 : TimeFormat::kMillis;
  c.track_changes = !o.state.empty();
  KPIPE_TRY(validate_window_config(c));
  return c;
}

Status run_window(const WindowOptions& options, Io& io) {
  if (options.time.empty()) return usage_error("--time PATH is required");
  auto config = window_config(options);
  if (!config) return config.take_error();
  auto unit = parse_time_unit(options.time_unit);
  if (!unit) return unit.take_error();
  auto paths = compile_paths(options, *config);
  if (!paths) return paths.take_error();
  auto stats = parse_stats(options.stats, stage_name(io.program, options.name));
  if (!stats) return stats.take_error();
  if (options.late == "dlq" && options.errors.dlq.empty())
    return usage_error("--late dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  if (options.late == "-")
    return usage_error("--late: late records cannot share standard output with the windows");
  if (options.flush_at_end && options.state.empty())
    return usage_error("--flush-at-end goes with --state");

  std::string stage = stage_name(io.program, options.name);
  auto bad = make_bad_input_handler(options.errors, stage, io, options.kafka);
  if (!bad) return bad.take_error();
  std::unique_ptr<Output> late_out;
  if (!options.late.empty() && options.late != "dlq") {
    auto opened = Output::open_append(options.late);
    if (!opened) return opened.take_error();
    late_out = std::move(*opened);
  }

  WindowEngine engine(*config, io.clock, &io.reporter);
  auto store = open_stage_state(options.state);
  if (!store) return store.take_error();
  StageState state(store->get(), stage, engine, io.clock, {},
                   [&] { return std::make_unique<WindowEngine>(*config, io.clock, &io.reporter); });
  state.on_restored = [&](const TopicPartition& p, Snapshottable& e,
                          std::optional<int64_t> checkpoint) {
    if (!checkpoint) return;
    auto& restored = static_cast<WindowEngine&>(e);
    Millis w = restored.watermark();
    io.reporter.info(fmt::format(
        "restored '{}' for {} [{}] as of checkpoint {} in '{}': {} window aggregate{}, watermark "
        "{}",
        stage, p.topic, p.partition, *checkpoint, display_target(options.state), restored.states(),
        restored.states() == 1 ? "" : "s", w == kNoWatermark ? "none" : format_rfc3339(w)));
  };
  KPIPE_TRY(await_input(store->get(), options.input, io.stop));
  auto restored = state.restore();
  if (!restored) return restored.take_error();
  if (*restored) {
    Millis w = engine.watermark();
    io.reporter.info(
        fmt::format("restored '{}' as of checkpoint {}: {} window aggregate{}, watermark {}", stage,
                    **restored, engine.states(), engine.states() == 1 ? "" : "s",
                    w == kNoWatermark ? "none" : format_rfc3339(w)));
  }
  WindowStage window(options, engine, std::move(*paths), *unit, **bad, late_out.get(), state,
                     io.reporter);
  state.on_dropped = [&](const TopicPartition&, Snapshottable& e) {
    window.partition_dropped(static_cast<WindowEngine&>(e));
  };
  FilterSettings settings{options.input, std::move(*stats)};
  if (late_out != nullptr) settings.outputs.emplace_back("the --late file", late_out.get());
  Status run = run_filter(window, settings, **bad, io);
  if (window.dropped() > 0)
    io.reporter.warning(
        fmt::format("dropped {} record{} too late for every window (--late FILE keeps them)",
                    window.dropped(), window.dropped() == 1 ? "" : "s"));
  if (late_out != nullptr && window.late() > 0)
    io.reporter.info(fmt::format("wrote {} late record{} to '{}'", window.late(),
                                 window.late() == 1 ? "" : "s", options.late));
  return run;
}

}  // namespace kpipe
