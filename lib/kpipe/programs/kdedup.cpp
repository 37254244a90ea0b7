#include "kpipe/programs/kdedup.h"

#include <optional>

#include "kpipe/event_time.h"
#include "kpipe/json.h"
#include "kpipe/programs/dlq_targets.h"
#include "kpipe/programs/stage_state.h"
#include "kpipe/stage/stateful.h"
#include "kpipe/store/sql.h"

namespace kpipe {

namespace {

// The saved state's format since the key of several --key paths became
// encode_key's JSON array ("1,2" before, "[1,2]" now): an older state of
// such keys would restore and then match nothing.
constexpr const char* kStateFormat = "kdedup/2";

// What decides the meaning of a saved state, in the command line's words:
// the key paths (as written), and what the times kept with the keys
// measure. A state saved with other keys would match none of them, and
// one whose times measure something else would be forgotten at once or
// never; --within D, --max-keys and --exact may change (a shorter
// horizon or fewer keys forget some sooner; a state saved without
// --exact holds hashes, which the engine refuses to use with it).
std::vector<std::string> state_options(const DedupOptions& o) {
  std::string keys;
  for (const std::string& k : o.keys) keys += (keys.empty() ? "--key " : " --key ") + k;
  if (keys.empty()) keys = "no --key";
  std::string time = "--time " + o.time + " --time-unit " + o.time_unit;
  if (o.within.empty()) {
    time = "no --within";
  } else if (o.time.empty()) {
    time = "--within without --time";
  }
  return {keys, time};
}

// What the command line says, checked and compiled once.
struct DedupPlan {
  DedupConfig engine;
  FieldSet fields;
  size_t key_count = 0;             // slots [0, key_count) of `fields`
  std::vector<size_t> key_slots;    // the same, listed for encode_key
  std::optional<size_t> time_slot;  // --time
  // With --state: the envelope's partition, which an instance of a
  // consumer group keeps its keys by (kpipe(7), MANY INSTANCES).
  std::optional<size_t> topic_slot;
  std::optional<size_t> partition_slot;
  TimeUnit time_unit = TimeUnit::kMillis;
  bool dups_to_dlq = false;
  std::string stage;
};

Expected<DedupPlan> make_plan(const DedupOptions& o, const std::string& program) {
  DedupPlan plan;
  plan.stage = stage_name(program, o.name);
  for (const std::string& text : o.keys) {
    auto path = FieldPath::parse(text);
    if (!path) return usage_error("--key: {}", path.error().message);
    plan.key_slots.push_back(plan.fields.add(*path));
  }
  plan.key_count = o.keys.size();
  if (!o.within.empty()) {
    auto d = parse_duration(o.within);
    if (!d) return usage_error("--within: {}", d.error().message);
    plan.engine.within = *d;
  }
  if (!o.time.empty()) {
    if (o.within.empty())
      return usage_error("--time needs --within: without a horizon, times are not used");
    auto path = FieldPath::parse(o.time);
    if (!path) return usage_error("--time: {}", path.error().message);
    plan.time_slot = plan.fields.add(*path);
  }
  auto unit = parse_time_unit(o.time_unit);
  if (!unit) return usage_error("--time-unit: {}", unit.error().message);
  plan.time_unit = *unit;
  if (!o.state.empty()) {
    plan.topic_slot = plan.fields.add(*FieldPath::parse(".topic"));
    plan.partition_slot = plan.fields.add(*FieldPath::parse(".partition"));
  }
  if (o.max_keys < 1 || o.max_keys > kMaxMaxKeys)
    return usage_error("--max-keys must be between 1 and {}", kMaxMaxKeys);
  plan.engine.max_keys = o.max_keys;
  plan.engine.exact = o.exact;
  plan.dups_to_dlq = o.dups == "dlq";
  if (plan.dups_to_dlq && o.errors.dlq.empty())
    return usage_error("--dups dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  return plan;
}

// Keys remembered and evicted, over an instance's partitions too.
uint64_t remembered(const StageState& state, const DedupEngine& single) {
  uint64_t n = single.remembered();
  state.for_each_slice([&](const TopicPartition&, Snapshottable& e) {
    n += static_cast<DedupEngine&>(e).remembered();
  });
  return n;
}

uint64_t evicted(const StageState& state, const DedupEngine& single) {
  uint64_t n = single.evicted();
  state.for_each_slice([&](const TopicPartition&, Snapshottable& e) {
    n += static_cast<DedupEngine&>(e).evicted();
  });
  return n;
}

// What a key split between partitions does to keys kept per partition.
constexpr std::string_view kSplitKeys =
    "an instance keeps its keys per partition, so duplicates across partitions pass";

// Decides each line one line late: the key's index slot is fetched while
// the next line is read and parsed, which hides the cache miss that
// otherwise costs more than the parsing. What is held back is written
// before anything that follows it (the next line, a control line, an
// error) and before the driver waits for input.
class DedupStage final : public ParsingStage {
 public:
  DedupStage(DedupPlan& plan, DedupEngine& engine, BadInputHandler& bad, Output* dups,
             StageState& state, Reporter& reporter)
      : plan_(plan), single_(engine), bad_(bad), dups_(dups), state_(state), reporter_(reporter) {
    for (size_t i = 0; i < plan.key_count; ++i) key_paths_.emplace_back(plan.fields.path(i).text());
    // Processing time moves while the input is quiet: expire then too.
    tick_ = plan.engine.within && !plan.time_slot;
    // The store's check sees the keys of every instance's partitions.
    state_.on_key_split = [this](const KeySplit& split) {
      if (warned_) return;
      warned_ = true;
      reporter_.warning(
          copartition_warning(split.key, split.recorded, split.seen, kSplitKeys, key_paths_));
    };
  }

  const FieldSet* fields() const override { return &plan_.fields; }

  Status on_parsed(const Line& line, const ParsedLine& parsed, Output& out) override {
    std::string_view key;
    std::optional<Millis> time;
    DedupEngine* engine = &single_;
    Status read = read_record(line, parsed, key, time, engine);
    if (!read.ok()) {
      KPIPE_TRY(settle(out));
      return read;
    }
    DedupEngine::Prepared prepared = engine->prepare(key);
    // The key's hash is at hand: the samples for the store's check take it.
    if (state_.sliced()) state_.sample_key(prepared.hi, key);
    KPIPE_TRY(settle(out));
    hold(line, key, prepared, time, engine);
    return {};
  }

  Status on_control(const Line& line, Output& out) override {
    KPIPE_TRY(settle(out));
    KPIPE_TRY(flush_dups());
    KPIPE_TRY(state_.on_control(line));
    out.write_line(line.text);
    return {};
  }

  Status before_wait(Output& out) override { return settle(out); }

  Status on_idle(Output&) override {
    // Nothing is pending here: before_wait settled it.
    if (tick_) {
      single_.tick();
      state_.for_each_slice(
          [](const TopicPartition&, Snapshottable& e) { static_cast<DedupEngine&>(e).tick(); });
    }
    return flush_dups();
  }

  Status on_end(Output& out) override {
    KPIPE_TRY(settle(out));
    return flush_dups();
  }

  void fill_counters(Counters& c) const override {
    c.out = passed_;
    c.dropped = dropped_;
    c.state_size = remembered(state_, single_);
    state_.meter.fill(c);
  }

  uint64_t passed() const { return passed_; }
  uint64_t dropped() const { return dropped_; }
  uint64_t dead_lettered_dups() const { return dead_lettered_dups_; }

 private:
  // The line was parsed even without a path: a line that is not JSON is
  // bad input.
  Status read_record(const Line& line, const ParsedLine& parsed, std::string_view& key,
                     std::optional<Millis>& time, DedupEngine*& engine) {
    if (!parsed.status.ok()) return parsed.status;
    values_ = parsed.values;
    if (state_.sliced()) KPIPE_TRY(find_engine(engine));
    key = line.text;
    if (plan_.key_count > 0) {
      auto k = build_key();
      if (!k) return k.take_error();
      key = *k;
    }
    if (!plan_.time_slot) return {};
    size_t slot = *plan_.time_slot;
    auto t = read_event_time(values_[slot], plan_.fields.path(slot).text(), plan_.time_unit);
    if (!t) return t.take_error();
    time = *t;
    return {};
  }

  // An instance's record goes to its partition's engine.
  Status find_engine(DedupEngine*& engine) {
    auto found =
        state_.engine_of(values_[*plan_.topic_slot], values_[*plan_.partition_slot], "keys");
    if (!found) return found.take_error();
    engine = static_cast<DedupEngine*>(*found);
    return {};
  }

  void hold(const Line& line, std::string_view key, const DedupEngine::Prepared& prepared,
            std::optional<Millis> time, DedupEngine* engine) {
    Pending& p = pending_;
    p.engine = engine;
    p.line.assign(line);
    if (plan_.key_count > 0) p.key.assign(key);  // else the key is the text
    p.prepared = prepared;
    p.time = time;
    p.active = true;
  }

  // Decides the line held back, if any, and writes it where it goes.
  Status settle(Output& out) {
    Pending& p = pending_;
    if (!p.active) return {};
    p.active = false;
    std::string_view text = p.line.text();
    std::string_view key = plan_.key_count == 0 ? text : std::string_view(p.key);
    DedupEngine& engine = *p.engine;
    bool passes = p.time ? engine.offer(p.prepared, key, *p.time) : engine.offer(p.prepared, key);
    if (passes && state_.sliced() && !warned_) check_copartitioned(engine, p.prepared, key);
    if (passes) {
      out.write_line(text);
      ++passed_;
      return {};
    }
    ++dropped_;
    if (dups_ != nullptr) {
      dups_->write_line(text);
      return dups_->end_record();
    }
    if (!plan_.dups_to_dlq) return {};
    ++dead_lettered_dups_;
    return bad_.dead_letter(p.line.input(), p.line.line(), duplicate_reason(key));
  }

  // Several --key paths make encode_key's JSON array. One path keeps the
  // text kdedup has always hashed for it, a string's escapes as written
  // (encode_key would rewrite them), so that saved states still match.
  Expected<std::string_view> build_key() {
    if (plan_.key_count > 1) return encode_key(plan_.fields, plan_.key_slots, values_, key_);
    const JsonField& f = values_[0];
    if (f.type == JsonType::kMissing)
      return data_error("field '{}' is missing", plan_.fields.path(0).text());
    if (f.type != JsonType::kObject && f.type != JsonType::kArray) return f.raw;
    key_.clear();
    append_minified(key_, f.raw);
    return std::string_view(key_);
  }

  // Keys are kept per partition: exact only when every record of a key
  // comes from one partition (kpipe(7), MANY INSTANCES). A key another of
  // this instance's partitions remembers says the topic is not keyed by
  // it; once is enough to say so. The signal is a duplicate in another
  // partition, rare and unforeseeable, so keys are picked by their hash,
  // not records by their turn: a picked key is looked for in every other
  // partition each time it passes one, and one key in four per other
  // partition is picked, which keeps the cost at a quarter of a lookup
  // per record however many partitions there are.
  void check_copartitioned(DedupEngine& engine, const DedupEngine::Prepared& prepared,
                           std::string_view key) {
    size_t others = state_.slice_count() - 1;
    if (others == 0 || prepared.hi % (4 * others) != 0) return;
    const TopicPartition* other = nullptr;
    const TopicPartition* mine = nullptr;
    state_.for_each_slice([&](const TopicPartition& p, Snapshottable& e) {
      if (&e == &engine) {
        mine = &p;
      } else if (other == nullptr && static_cast<DedupEngine&>(e).remembers(prepared, key)) {
        other = &p;
      }
    });
    if (other == nullptr || mine == nullptr) return;
    warned_ = true;
    reporter_.warning(copartition_warning(key, *other, *mine, kSplitKeys, key_paths_));
  }

  std::string duplicate_reason(std::string_view key) const {
    if (plan_.key_count == 0) return "duplicate of an earlier line";
    constexpr size_t kShown = 200;
    if (key.size() <= kShown) return fmt::format("duplicate of an earlier record with key {}", key);
    return fmt::format("duplicate of an earlier record with key {}...", key.substr(0, kShown));
  }

  Status flush_dups() { return dups_ != nullptr ? dups_->flush() : Status(); }

  DedupPlan& plan_;
  DedupEngine& single_;  // a single pipeline's (an instance's are in state_)
  BadInputHandler& bad_;
  Output* dups_;
  StageState& state_;
  Reporter& reporter_;
  bool warned_ = false;
  std::vector<std::string> key_paths_;  // --key, as written
  bool tick_ = false;
  const JsonField* values_ = nullptr;  // the line's, during on_parsed
  std::string key_;
  struct Pending {
    bool active = false;
    DedupEngine* engine = nullptr;
    HeldLine line;
    std::string key;
    DedupEngine::Prepared prepared;
    std::optional<Millis> time;
  };
  Pending pending_;
  uint64_t passed_ = 0;
  uint64_t dropped_ = 0;
  uint64_t dead_lettered_dups_ = 0;
};

}  // namespace

Status run_dedup(const DedupOptions& options, Io& io) {
  auto plan = make_plan(options, io.program);
  if (!plan) return plan.take_error();
  auto stats = parse_stats(options.stats, plan->stage);
  if (!stats) return stats.take_error();
  auto bad = make_bad_input_handler(options.errors, plan->stage, io, options.kafka);
  if (!bad) return bad.take_error();
  std::unique_ptr<Output> dups;
  if (!options.dups.empty() && !plan->dups_to_dlq) {
    auto opened = Output::open_append(options.dups);
    if (!opened) return opened.take_error();
    dups = std::move(*opened);
  }

  DedupEngine engine(plan->engine, io.clock);
  auto store = open_stage_state(options.state);
  if (!store) return store.take_error();
  StateFormat format{kStateFormat, "", state_options(options)};
  // Keys of one path, and whole lines, hash as they always did.
  if (plan->key_count > 1)
    format.unmarked_refusal =
        "holds keys of several --key paths as an older kdedup wrote them, which this one would "
        "never match";
  StageState state(store->get(), plan->stage, engine, io.clock, std::move(format),
                   [&] { return std::make_unique<DedupEngine>(plan->engine, io.clock); });
  uint64_t dropped_evicted = 0;  // by the engines of partitions revoked
  state.on_restored = [&](const TopicPartition& p, Snapshottable& e,
                          std::optional<int64_t> checkpoint) {
    if (!checkpoint) return;
    io.reporter.info(fmt::format("restored {} keys of '{}' for {} [{}] from checkpoint {} in '{}'",
                                 static_cast<DedupEngine&>(e).remembered(), plan->stage, p.topic,
                                 p.partition, *checkpoint, display_target(options.state)));
  };
  state.on_dropped = [&](const TopicPartition&, Snapshottable& e) {
    dropped_evicted += static_cast<DedupEngine&>(e).evicted();
  };
  KPIPE_TRY(await_input(store->get(), options.input, io.stop));
  auto restored = state.restore();
  if (!restored) return restored.take_error();
  if (*restored)
    io.reporter.info(fmt::format("restored {} keys of '{}' from checkpoint {} in '{}'",
                                 engine.remembered(), plan->stage, **restored,
                                 display_target(options.state)));

  DedupStage stage(*plan, engine, **bad, dups.get(), state, io.reporter);
  FilterSettings settings{options.input, std::move(*stats)};
  if (dups != nullptr) settings.outputs.emplace_back("the --dups file", dups.get());
  Status run = run_filter(stage, settings, **bad, io);

  uint64_t evicted_keys = evicted(state, engine) + dropped_evicted;
  if (evicted_keys > 0)
    io.reporter.warning(
        fmt::format("evicted {} keys to stay within --max-keys {}: their duplicates pass again",
                    evicted_keys, plan->engine.max_keys));
  if (!run.ok()) return run;
  uint64_t bad_lines = (*bad)->skipped() + (*bad)->dead_lettered() - stage.dead_lettered_dups();
  std::string bad_part = bad_lines > 0 ? fmt::format(", {} bad", bad_lines) : "";
  io.reporter.info(
      fmt::format("{} records in, {} passed, {} dropped{}; {} keys remembered, {} evicted",
                  stage.passed() + stage.dropped() + bad_lines, stage.passed(), stage.dropped(),
                  bad_part, remembered(state, engine), evicted_keys));
  return {};
}

}  // namespace kpipe
