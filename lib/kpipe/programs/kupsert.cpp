#include "kpipe/programs/kupsert.h"

#include <sys/stat.h>

#include <algorithm>

#include "kpipe/choices.h"
#include "kpipe/control.h"
#include "kpipe/programs/dlq_targets.h"
#include "kpipe/programs/stage_state.h"
#include "kpipe/target.h"

namespace kpipe {

namespace {

// In checkpoint mode rows are held until the checkpoint line: past this
// many, the pipeline probably drops control lines (or checkpoints are far
// apart), and memory grows with every row.
constexpr size_t kHoldWarning = 1000000;

// The tables of the state database (state_store.cpp): with --state naming
// --db, kupsert must not write into them.
const std::vector<std::string> kStateTables = {
    "checkpoints",     "checkpoint_offsets", "offsets",          "stage_state",
    "stage_snapshots", "kpipe_schema",       "kpipe_runs",       "partition_owners",
    "kpipe_sequences", "kpipe_instances",    "kpipe_key_samples"};

}  // namespace

// --- the stage -----------------------------------------------------------------

UpsertStage::UpsertStage(UpsertWriter& writer, StateStore* store, bool same_file, int64_t batch,
                         std::string stage, BadInputHandler& bad, Io& io)
    : writer_(writer),
      store_(store),
      same_file_(same_file),
      batch_(static_cast<size_t>(std::max<int64_t>(batch, 1))),
      stage_(std::move(stage)),
      bad_(bad),
      io_(io) {
  meter_.notify_to(io_.notifier);
  writer_.report_to(io_.reporter);
}

Status UpsertStage::on_line(const Line& line, Output&) {
  Status added = writer_.add(line);
  if (!added.ok()) {
    // Under --on-error fail kupsert stops here: the rows before this line
    // are written first, as a line-by-line program would have (with
    // checkpoints they wait for theirs, and a restart replays them).
    if (!exactly_once() && bad_.mode() == OnError::kFail) KPIPE_TRY(commit_batch());
    return added;
  }
  ++rows_;
  if (exactly_once()) {
    if (!warned_holding_ && writer_.pending() >= kHoldWarning) {
      warned_holding_ = true;
      io_.reporter.warning(fmt::format(
          "holding {} rows for the next checkpoint line: they commit with it; if checkpoints do "
          "not come, a stage "
          "in between drops control lines (for jq: jq -c 'if has(\"$kpipe\") then . else ... end')",
          writer_.pending()));
    }
    return {};
  }
  Millis now = io_.clock.steady();
  if (writer_.pending() == 1) first_held_at_ = now;
  if (writer_.pending() >= batch_ || now - first_held_at_ >= kMaxBatchDelay) return commit_batch();
  return {};
}

Status UpsertStage::commit_batch() {
  if (writer_.pending() == 0) return {};
  auto tx = writer_.begin();
  if (!tx) return tx.take_error();
  // A row the table refuses is bad input. Under --on-error fail kupsert
  // stops at it, naming its line, and the rows before it are committed, as
  // for a line refused before it reaches the table (on_line): the writer
  // stops there with them written in the transaction.
  bool refused = false;
  Status written = writer_.write_pending(
      [this, &refused](const std::string& input, const Line& line, std::string_view reason) {
        Status handled = bad_.handle(input, line, reason);
        refused = !handled.ok() && bad_.mode() == OnError::kFail;
        return handled;
      });
  if (!written.ok()) {
    if (refused) KPIPE_TRY(tx->commit());
    return written;
  }
  return tx->commit();
}

Status UpsertStage::commit_checkpoint(const Checkpoint& c) {
  auto tx = writer_.begin();
  if (!tx) return tx.take_error();
  KPIPE_TRY(writer_.write_pending(
      [this](const std::string& input, const Line& line, std::string_view reason) {
        return bad_.handle(input, line, reason);
      }));
  // Dead letters are durable before the checkpoint that passes them.
  KPIPE_TRY(bad_.sync());
  KPIPE_TRY(store_->complete_in_transaction(c, stage_, io_.clock.now()));
  KPIPE_TRY(tx->commit());
  owned_.clear();
  for (const auto& o : c.offsets)
    if (o.epoch > 0) owned_.push_back(o);
  return {};
}

Status UpsertStage::on_control(const Line& line, Output& out) {
  auto cp = parse_checkpoint(line.text);
  if (!cp) return cp.take_error();
  if (!*cp) {
    // As the terminal stage, partition events (which guide the event-time
    // stages before this one) end here, as in kcheckpoint commit; other
    // kinds, and everything without --state, are forwarded.
    if (store_ != nullptr) {
      auto event = parse_partition_event(line.text);
      if (!event) return event.take_error();
      if (*event) return {};
      auto instance = parse_instance_line(line.text);
      if (!instance) return instance.take_error();
      if (*instance) return {};
    }
    out.write_line(line.text);
    return {};
  }
  if (exactly_once()) {
    KPIPE_TRY(commit_checkpoint(**cp));
    ++completed_;
    return meter_completed(*store_, meter_, **cp, io_.clock.now());
  }
  // Every row before the checkpoint is in the table before the checkpoint
  // completes (at-least-once: a replay upserts the same rows again).
  KPIPE_TRY(commit_batch());
  KPIPE_TRY(bad_.sync());
  if (store_ == nullptr) {
    // Without --state the line goes on, so that a `kcheckpoint commit`
    // after kupsert completes it once the rows are in.
    out.write_line(line.text);
    return {};
  }
  Millis now = io_.clock.now();
  KPIPE_TRY(store_->complete(**cp, stage_, now));
  ++completed_;
  return meter_completed(*store_, meter_, **cp, now);
}

Status UpsertStage::on_idle(Output&) {
  // The input paused: what was read lands now (with checkpoints, rows wait
  // for theirs).
  if (exactly_once()) return {};
  return commit_batch();
}

Status UpsertStage::on_end(Output&) {
  bool stopped = io_.stop != nullptr && io_.stop->load(std::memory_order_relaxed);
  if (exactly_once() && stopped && writer_.pending() > 0) {
    // Stopped by a signal: the stages before may not have sent their last
    // checkpoint; the rows since the last one are replayed from it.
    io_.reporter.info(
        fmt::format("{} rows after the last checkpoint were not written: a restart replays them "
                    "from that checkpoint",
                    writer_.pending()));
    writer_.discard_pending();
    return {};
  }
  // At the end of the input the rows after the last checkpoint are written
  // too: kwindow --flush-at-end fires its last windows after kconsume's
  // last checkpoint, and nothing follows them. No checkpoint covers them,
  // so they are at least once: were the input cut short by a stage dying
  // before kupsert, the restart writes them again, by key. An instance
  // writes them only while it still owns the partitions of its last
  // checkpoint: a stage before it may have stopped because another
  // instance took them over, and stale rows would overwrite that one's.
  if (exactly_once() && !owned_.empty() && writer_.pending() > 0) {
    auto tx = writer_.begin();
    if (!tx) return tx.take_error();
    Status owner = store_->check_owners(owned_, "the rows after the last checkpoint");
    if (!owner.ok()) {
      io_.reporter.info(fmt::format("{} rows after the last checkpoint were not written: {}",
                                    writer_.pending(), owner.error().message));
      writer_.discard_pending();
      return {};
    }
    KPIPE_TRY(writer_.write_pending(
        [this](const std::string& input, const Line& line, std::string_view reason) {
          return bad_.handle(input, line, reason);
        }));
    KPIPE_TRY(tx->commit());
  }
  KPIPE_TRY(commit_batch());
  if (store_ != nullptr && completed_ == 0 && rows_ > 0)
    io_.reporter.warning(fmt::format(
        "{} rows arrived but no checkpoint line: run kconsume with --state, and make sure every "
        "stage in between "
        "lets control lines through (for jq: jq -c 'if has(\"$kpipe\") then . else ... end')",
        rows_));
  return {};
}

void UpsertStage::fill_counters(Counters& c) const {
  c.out = writer_.rows_written();
  c.dropped = writer_.rows_unchanged();
  c.state_size = writer_.pending();
  meter_.fill(c);
}

// --- the program ---------------------------------------------------------------

namespace {

// The column names of --key or --columns: each argument is COL[,COL]...
Expected<std::vector<std::string>> split_names(std::string_view option,
                                               const std::vector<std::string>& given) {
  std::vector<std::string> names;
  for (const std::string& list : given) {
    size_t start = 0;
    for (;;) {
      size_t comma = list.find(',', start);
      std::string_view name = std::string_view(list).substr(start, comma - start);
      if (name.empty()) return usage_error("{} '{}': a column name is empty", option, list);
      auto column = column_of_option(option, name);
      if (!column) return column.take_error();
      names.push_back(std::move(*column));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return names;
}

// Whether two paths name one file (after the first has been opened, so it
// exists): --state and --db may be spelled differently.
bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// What decides where a run's rows went, in the command line's words: a
// run with another table, key or mode on the same state (another instance
// of the pipeline, or a restart) would complete the same checkpoints into
// other rows, each half of the windows in one table.
std::vector<std::string> state_options(const UpsertOptions& o, const std::vector<std::string>& key,
                                       std::string_view mode) {
  std::string keys;
  for (const std::string& k : key) keys += (keys.empty() ? "" : ",") + k;
  return {"--table " + o.table, keys.empty() ? "no --key" : "--key " + keys,
          fmt::format("--mode {}", mode)};
}

}  // namespace

Status run_upsert(const UpsertOptions& o, Io& io) {
  if (o.db.empty()) return usage_error("--db FILE is required");
  auto mode = parse_choice("--mode", o.mode, {"upsert", "ignore"});
  if (!mode) return mode.take_error();
  if (o.batch < 1) return usage_error("--batch must be at least 1");
  auto stats = parse_stats(o.stats, stage_name(io.program, o.name));
  if (!stats) return stats.take_error();
  auto key = split_names("--key", o.key);
  if (!key) return key.take_error();
  auto columns = split_names("--columns", o.columns);
  if (!columns) return columns.take_error();
  std::vector<std::string> kept = state_options(o, *key, *mode == 0 ? "upsert" : "ignore");
  TableSpec spec{o.table, std::move(*key), std::move(*columns),
                 *mode == 0 ? UpsertMode::kUpsert : UpsertMode::kIgnore, o.strict};
  KPIPE_TRY(validate_table_spec(spec));

  OpenOptions options;
  options.application = io.program;
  auto db = Database::open(o.db, options);
  if (!db) return db.take_error();
  bool pg = (*db)->postgres();
  // A batch's pages stay in memory until it commits: with SQLite's default
  // 2 MiB cache, a batch of random keys spills dirty pages into the WAL
  // mid-transaction and writes many of them more than once.
  if (!pg) KPIPE_TRY((*db)->exec("PRAGMA cache_size = -65536"));
  // --state naming --db, compared as databases, not as text: one server
  // is 127.0.0.1 and localhost, and exactly once must not hang on the
  // spelling.
  bool same = false;
  if (!o.state.empty()) {
    auto named = (*db)->is_named_by(o.state, options);
    if (!named) return named.take_error();
    same = *named;
  }
  // kpipe's own tables in a state database (the --state one, or any that
  // holds them) are never a sink: upserting into 'offsets' would move
  // where the pipeline resumes.
  auto is_state = (*db)->has_table("kpipe_schema");
  if (!is_state) return is_state.take_error();
  if (same || *is_state) {
    for (const auto& t : kStateTables)
      if (same_name(t, split_table_name(o.table).name))  // in any schema
        return usage_error("--table '{}' is one of kpipe's own tables in the state database '{}'",
                           o.table, (*db)->path());
  }
  if (!pg && !o.errors.dlq.empty() && !is_kafka_target(o.errors.dlq) &&
      same_file(o.db, o.errors.dlq))
    return usage_error(
        "--dlq must name another file than --db: kupsert holds its write lock while dead letters "
        "are written");
  std::unique_ptr<StateStore> store;
  if (!o.state.empty()) {
    auto opened = same ? StateStore::attach(**db) : StateStore::open(o.state);
    if (!opened) return opened.take_error();
    // The terminal stage's lock (kpipe(7), CONTROL LINES AND CHECKPOINTS),
    // shared by the instances of a consumer group (MANY INSTANCES), whose
    // kconsume registers before its first line, the instance line.
    auto instance = await_instance(o.input, io.stop);
    if (!instance) return instance.take_error();
    KPIPE_TRY((*opened)->lock_stage_as_kept(stage_name(io.program, o.name),
                                            *instance ? (*instance)->pipeline : ""));
    KPIPE_TRY(keep_stage_options(**opened, stage_name(io.program, o.name), kept));
    store = std::move(*opened);
    // Which guarantee holds is said, not left to the reader of kupsert(1).
    if (same)
      io.reporter.info(
          "exactly once: --state is the database of --db, where each checkpoint completes with "
          "its rows");
    else
      io.reporter.info(fmt::format(
          "at least once: --state '{}' is another database than --db '{}': rows commit before "
          "their checkpoint completes",
          display_target(o.state), (*db)->path()));
  }
  auto writer = UpsertWriter::open(**db, std::move(spec));
  if (!writer) return writer.take_error();
  std::string name = stage_name(io.program, o.name);
  auto bad = make_bad_input_handler(o.errors, name, io, o.kafka);
  if (!bad) return bad.take_error();
  UpsertStage stage(**writer, store.get(), same, o.batch, name, **bad, io);
  FilterSettings settings{o.input, std::move(*stats)};
  return run_filter(stage, settings, **bad, io);
}

}  // namespace kpipe
