#include "kpipe/programs/kcheckpoint.h"
#include "kpipe/stage/checkpoint_meter.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <set>

#include "kpipe/choices.h"
#include "kpipe/control.h"
#include "kpipe/json.h"
#include "kpipe/kafka/acl.h"
#include "kpipe/kafka/kafka_log.h"
#include "kpipe/kafka/topic.h"
#include "kpipe/programs/checkpoint_plot.h"
#include "kpipe/programs/dlq_targets.h"
#include "kpipe/programs/kconsume.h"
#include "kpipe/programs/plot_output.h"
#include "kpipe/programs/stage_state.h"
#include "kpipe/stage/line_feed.h"
#include "kpipe/text_table.h"

namespace kpipe {

int64_t reset_target(const ResetSpec& spec, std::optional<int64_t> current, int64_t low,
                     int64_t high, int64_t at_time) {
  int64_t target = low;
  switch (spec.kind) {
    case ResetSpec::Kind::kEarliest:
      target = low;
      break;
    case ResetSpec::Kind::kLatest:
      target = high;
      break;
    case ResetSpec::Kind::kTime:
      target = at_time;
      break;
    case ResetSpec::Kind::kShift:
      // Saturating: the result is clamped below anyway.
      if (__builtin_add_overflow(current.value_or(low), spec.value, &target))
        target = spec.value > 0 ? INT64_MAX : INT64_MIN;
      break;
    case ResetSpec::Kind::kOffset:
      target = spec.value;
      break;
  }
  return std::clamp(target, low, high);
}

namespace {

Expected<std::unique_ptr<StateStore>> open_state(const CheckpointOptions& o) {
  if (o.state.empty()) return usage_error("--state FILE is required");
  return StateStore::open(o.state);
}

// For the commands that only read the state: never creates the file
// (a typo would have made an empty database and exited 0).
Expected<std::unique_ptr<StateStore>> read_state(const CheckpointOptions& o) {
  if (o.state.empty()) return usage_error("--state FILE is required");
  return StateStore::open_existing(o.state);
}

// table on a terminal, ndjson otherwise, unless --format says.
Expected<bool> use_table(const CheckpointOptions& o, const Io& io) {
  if (o.format.empty()) return io.interactive;
  auto i = parse_choice("--format", o.format, {"table", "ndjson"});
  if (!i) return i.take_error();
  return *i == 0;
}

void append_offset_json(std::string& out, const StoredOffset& s) {
  out.append("{\"topic\":");
  append_json_string(out, s.topic);
  out.append(",\"partition\":");
  append_int(out, s.partition);
  out.append(",\"offset\":");
  s.offset.append_json(out);
  out.append(",\"checkpoint\":");
  append_int(out, s.checkpoint);
  out.append(",\"committed_at\":\"");
  append_rfc3339(out, s.committed_at);
  out.append("\"}\n");
}

// One run of --each's command: /bin/sh -c COMMAND with one checkpoint's
// lines streamed into a pipe on its standard input. It runs in a process
// group of its own, so that stopping it reaches whatever it started, with
// SIGPIPE back to its default and none of kpipe's descriptors (all are
// opened O_CLOEXEC; the pipe's read end is dup'ed onto 0).
class EachRun {
 public:
  struct Result {
    int wait_status = 0;
    bool read_all = true;  // the pipe was empty when the command exited
  };

  static Expected<std::unique_ptr<EachRun>> start(const std::string& command, Io& io,
                                                  const std::function<Status()>& tick) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      return failure("cannot create a pipe for '{}': {}", command, std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[0], 0);
    // Its standard output is kcheckpoint's (what it prints goes on down a
    // pipeline); standard error is inherited.
    if (io.out.fd() != 1) posix_spawn_file_actions_adddup2(&actions, io.out.fd(), 1);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    // kpipe ignores SIGPIPE (a closed pipe is EPIPE to it): the command
    // gets the default back, as from a shell.
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT}) sigaddset(&defaults, sig);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    std::string sh = "sh", dash_c = "-c", text = command;
    char* argv[] = {sh.data(), dash_c.data(), text.data(), nullptr};
    pid_t pid = 0;
    int err = ::posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(fds[0]);
    if (err != 0) {
      ::close(fds[1]);
      return failure("cannot run '/bin/sh -c {}': {}", command, std::strerror(err));
    }
    auto run = std::unique_ptr<EachRun>(new EachRun(pid));
    run->in_ = Output::owning(fds[1], command);
    run->in_fd_ = fds[1];
    run->in_->set_stop_check(
        [stop = io.stop] { return stop != nullptr && stop->load(std::memory_order_relaxed); });
    run->in_->set_tick_hook(tick);
    return run;
  }

  ~EachRun() { abort(); }
  EachRun(const EachRun&) = delete;
  EachRun& operator=(const EachRun&) = delete;

  Output& input() { return *in_; }
  Millis blocked_ms() const { return in_ ? in_->blocked_ms() : 0; }

  // Ends the command's input and waits for it to exit.
  Expected<Result> finish() {
    KPIPE_TRY(in_->flush());
    Result r;
    r.read_all = !in_->closed();
    // A reader of our own on the pipe, which reads nothing: once the
    // command has exited, what the pipe still holds is what it left unread.
    std::string path = "/proc/self/fd/" + std::to_string(in_fd_);
    int probe = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    close_input();
    r.wait_status = reap();
    int unread = 0;
    if (probe >= 0 && ::ioctl(probe, FIONREAD, &unread) == 0 && unread > 0) r.read_all = false;
    if (probe >= 0) ::close(probe);
    return r;
  }

  // Stops the command before its input ends: seeing the end, it would take
  // a part of a checkpoint's lines for all of them. The input stays open
  // until the command and what it started are gone.
  void abort() {
    if (pid_ <= 0) {
      close_input();
      return;
    }
    ::kill(-group_, SIGTERM);
    if (!reaped_within(2000)) ::kill(-group_, SIGKILL);
    (void)reap();
    // A process the shell started may still hold the pipe.
    for (int i = 0; in_ && i < 200; ++i) {
      pollfd pfd{in_fd_, 0, 0};
      if (::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR) != 0) break;
      if (i == 0) ::kill(-group_, SIGKILL);
      ::poll(nullptr, 0, 10);
    }
    close_input();
  }

 private:
  explicit EachRun(pid_t pid) : pid_(pid), group_(pid) {}

  void close_input() {
    if (!in_) return;
    in_->set_tick_hook(nullptr);
    in_.reset();  // closes the pipe: the command sees the end of its input
  }

  bool reaped_within(int ms) {
    for (int waited = 0; waited < ms; waited += 10) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_ || (r < 0 && errno != EINTR)) {
        status_ = status;
        pid_ = -pid_;  // reaped; the group may live on
        return true;
      }
      ::poll(nullptr, 0, 10);
    }
    return false;
  }

  int reap() {
    if (pid_ > 0) {
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      status_ = status;
      pid_ = -pid_;
    }
    return status_;
  }

  pid_t pid_;    // negative once reaped
  pid_t group_;  // its process group, which may outlive it
  int status_ = 0;
  std::unique_ptr<Output> in_;
  int in_fd_ = -1;
};

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

// The commit stage: marks each checkpoint complete once every line before
// it has been delivered, and warns when checkpoints stop arriving while
// data keeps coming (a stage in between drops control lines).
//
// Delivered (kpipe(7), CONTROL LINES AND CHECKPOINTS): with --passthrough,
// once the reader has read the bytes up to the checkpoint's line from the
// pipe; the stage goes on reading meanwhile and completes checkpoints as
// the reader passes them (at later lines, idle ticks, while a write waits,
// and at the end of input, where it waits for the reader). With --each,
// once the command that got the checkpoint's lines has exited 0. Without
// either, at once: nothing is written.
class CommitStage final : public LineStage {
 public:
  CommitStage(StateStore& store, std::string stage, const CheckpointOptions& o, Millis interval,
              Io& io)
      : store_(store),
        stage_(std::move(stage)),
        passthrough_(o.passthrough),
        each_(o.each),
        interval_(interval),
        io_(io) {
    last_checkpoint_ = io_.clock.steady();
    meter_.notify_to(io_.notifier);
    tick_ = [this] { return complete_delivered(io_.out); };
    if (passthrough_) io_.out.set_tick_hook(tick_);
  }
  ~CommitStage() override {
    run_.reset();  // a command still running has no checkpoint: it is stopped
    io_.out.set_tick_hook(nullptr);
  }

  Status on_line(const Line& line, Output& out) override {
    ++since_checkpoint_;
    if (!each_.empty()) {
      KPIPE_TRY(feed_command(line.text));
    } else if (passthrough_) {
      // The last line's flush may have let the reader pass a checkpoint.
      if (!pending_.empty() && out.bytes_written() != looked_at_)
        KPIPE_TRY(complete_delivered(out));
      out.write_line(line.text);
      ++counters_out_;
    }
    if ((since_checkpoint_ & 1023) == 1) check_silence();
    return {};
  }

  Status on_control(const Line& line, Output& out) override {
    auto cp = parse_checkpoint(line.text);
    if (!cp) return cp.take_error();
    if (!*cp) {
      // Partition events guide the event-time stages before this one, an
      // instance line the stages' locks (kpipe(7), MANY INSTANCES); the
      // terminal stage's output is data. Other kinds are forwarded.
      auto event = parse_partition_event(line.text);
      if (!event) return event.take_error();
      if (*event) return {};
      auto instance = parse_instance_line(line.text);
      if (!instance) return instance.take_error();
      if (*instance) return {};
      if (!each_.empty()) return feed_command(line.text);
      if (passthrough_) out.write_line(line.text);
      return {};
    }
    int64_t id = (**cp).id;
    if (!each_.empty()) {
      KPIPE_TRY(finish_command(**cp));
    } else if (passthrough_) {
      // Complete once the reader has read every line before it: remember
      // where they end, and go on.
      KPIPE_TRY(out.flush());
      pending_.push_back({out.bytes_written(), std::move(**cp)});
      KPIPE_TRY(complete_delivered(out));
    } else {
      KPIPE_TRY(complete(**cp));
    }
    since_checkpoint_ = 0;
    warned_ = false;
    last_checkpoint_ = io_.clock.steady();
    blocked_at_checkpoint_ = blocked_total();
    last_id_ = id;
    return {};
  }

  // The command gets its lines as they come, not only at the checkpoint.
  Status before_wait(Output&) override { return run_ ? run_->input().flush() : Status(); }

  Status on_idle(Output& out) override {
    check_silence();
    return complete_delivered(out);
  }

  Status on_end(Output& out) override {
    if (run_) {
      // Lines after the last checkpoint: no checkpoint covers them, so the
      // next run reads them again. The command must not take them.
      run_.reset();
      io_.reporter.warning(fmt::format(
          "{} line{} after {} came without a checkpoint: '{}' was stopped before the end of its "
          "input, and the next run reads them again",
          since_checkpoint_, since_checkpoint_ == 1 ? "" : "s",
          last_id_ > 0 ? fmt::format("checkpoint {}", last_id_) : "the start", each_));
    }
    if (!pending_.empty()) {
      // The end of input: wait for the reader to read the rest.
      auto drained = out.wait_delivered(pending_.back().end);
      if (!drained) return drained.take_error();
      KPIPE_TRY(complete_delivered(out));
      if (!pending_.empty())
        io_.reporter.info(fmt::format(
            "checkpoint {} is not complete: the reader of standard output {} before reading all "
            "its lines",
            pending_.front().checkpoint.id,
            *drained == Output::Drain::kClosed ? "closed the pipe"
                                               : "was still reading when asked to stop"));
    }
    if (completed_ == 0 && since_checkpoint_ > 0)
      io_.reporter.warning(
          fmt::format("{} records arrived but no checkpoint line: run kconsume with --state, and "
                      "make sure every stage in "
                      "between lets control lines through (for jq: jq -c 'if has(\"$kpipe\") then "
                      ". else ... end')",
                      since_checkpoint_));
    io_.reporter.info(fmt::format("completed {} checkpoints", completed_));
    return {};
  }

  void fill_counters(Counters& c) const override {
    c.out = counters_out_;
    meter_.fill(c);
  }

 private:
  struct Pending {
    uint64_t end = 0;  // where the lines before the checkpoint end in the output
    Checkpoint checkpoint;
  };

  Status complete(const Checkpoint& c) {
    Millis now = io_.clock.now();
    KPIPE_TRY(store_.complete(c, stage_, now));
    ++completed_;
    return meter_completed(store_, meter_, c, now);
  }

  // Completes, in order, the checkpoints whose lines the reader has read.
  Status complete_delivered(Output& out) {
    if (pending_.empty()) return {};
    looked_at_ = out.bytes_written();
    uint64_t delivered = out.bytes_delivered();
    while (!pending_.empty() && pending_.front().end <= delivered) {
      KPIPE_TRY(complete(pending_.front().checkpoint));
      pending_.pop_front();
    }
    return {};
  }

  Status feed_command(std::string_view text) {
    if (!run_) {
      auto started = EachRun::start(each_, io_, tick_);
      if (!started) return started.take_error();
      run_ = std::move(*started);
    }
    Output& in = run_->input();
    in.write_line(text);
    return in.end_record();
  }

  Status finish_command(const Checkpoint& c) {
    // A checkpoint without lines is complete: there is nothing to deliver.
    if (!run_) return complete(c);
    Millis start = io_.clock.steady();
    auto result = run_->finish();
    finished_blocked_ += run_->blocked_ms() + (io_.clock.steady() - start);
    run_.reset();
    if (!result) return result.take_error();
    if (result->wait_status != 0)
      return failure("command '{}' {}: checkpoint {} is not complete", each_,
                     describe_exit(result->wait_status), c.id);
    if (!result->read_all)
      return failure(
          "command '{}' exited with status 0 without reading all its input: "
          "checkpoint {} is not complete",
          each_, c.id);
    return complete(c);
  }

  // Time spent waiting for the reader or the command: checkpoints arrive
  // late then because this stage reads slowly, not because a stage in
  // between drops them.
  Millis blocked_total() const {
    return io_.out.blocked_ms() + finished_blocked_ + (run_ ? run_->blocked_ms() : 0);
  }

  void check_silence() {
    Millis quiet =
        io_.clock.steady() - last_checkpoint_ - (blocked_total() - blocked_at_checkpoint_);
    if (warned_ || since_checkpoint_ == 0 || quiet < 3 * interval_) return;
    warned_ = true;
    io_.reporter.warning(
        fmt::format("no checkpoint line for {} while {} records arrived: a stage in between drops "
                    "control lines; let them "
                    "through (for jq: jq -c 'if has(\"$kpipe\") then . else ... end')",
                    format_duration(quiet), since_checkpoint_));
  }

  StateStore& store_;
  std::string stage_;
  bool passthrough_;
  std::string each_;
  Millis interval_;
  Io& io_;
  std::function<Status()> tick_;
  std::deque<Pending> pending_;  // --passthrough: read up to, not yet completed
  uint64_t looked_at_ = 0;
  std::unique_ptr<EachRun> run_;  // --each: the command for the lines since the last checkpoint
  Millis finished_blocked_ = 0;
  Millis blocked_at_checkpoint_ = 0;
  int64_t last_id_ = 0;
  Millis last_checkpoint_;
  uint64_t since_checkpoint_ = 0;
  uint64_t completed_ = 0;
  CheckpointMeter meter_;
  uint64_t counters_out_ = 0;
  bool warned_ = false;
};

struct Scope {
  std::string topic;
  std::vector<int32_t> partitions;  // empty: all
  bool kinesis = false;             // kinesis:NAME[:SHARDS]: a stream's shards
};

Expected<std::vector<Scope>> parse_scopes(const std::vector<std::string>& specs) {
  std::vector<Scope> out;
  for (const auto& spec : specs) {
    Scope s;
    std::string_view rest = spec;
    if (is_kinesis_target(rest)) {
      s.kinesis = true;
      rest.remove_prefix(kKinesisPrefix.size());
    }
    size_t colon = rest.find(':');
    s.topic = std::string(rest.substr(0, colon));
    if (s.topic.empty()) return usage_error("-t '{}': the topic is missing", spec);
    if (s.kinesis) {
      auto name = parse_kinesis_target(std::string(kKinesisPrefix) + s.topic);
      if (!name) return name.take_error();
    }
    if (colon != std::string::npos) {
      auto parts = parse_partition_list(rest.substr(colon + 1));
      if (!parts) return parts.take_error();
      s.partitions = std::move(*parts);
    }
    out.push_back(std::move(s));
  }
  return out;
}

// history --plot: the checkpoints' durations and latency as a picture
// (checkpoint_plot.h) in place of the table.
Status plot_checkpoint_history(const CheckpointOptions& o, Io& io) {
  if (!o.format.empty())
    return usage_error("--plot and --format cannot be combined: the picture replaces the report");
  auto store = read_state(o);
  if (!store) return store.take_error();
  auto checkpoints = (*store)->checkpoints();
  if (!checkpoints) return checkpoints.take_error();
  auto chart = checkpoint_chart(*checkpoints, o.state);
  if (!chart) return chart.take_error();
  return write_plot(*chart, o.plot, io);
}

}  // namespace

Status run_checkpoint_commit(const CheckpointOptions& o, Io& io) {
  if (!o.each.empty() && o.passthrough)
    return usage_error("--each and --passthrough cannot be combined: the lines go to COMMAND");
  if (o.each_given && o.each.empty()) return usage_error("--each: the command is empty");
  auto store = open_state(o);
  if (!store) return store.take_error();
  // The terminal stage's lock (kpipe(7), CONTROL LINES AND CHECKPOINTS),
  // shared by the instances of a consumer group (MANY INSTANCES), whose
  // kconsume registers before its first line, the instance line.
  auto instance = await_instance(o.input, io.stop);
  if (!instance) return instance.take_error();
  KPIPE_TRY((*store)->lock_stage_as_kept(stage_name(io.program, o.name),
                                         *instance ? (*instance)->pipeline : ""));
  auto interval = parse_duration(o.checkpoint_interval);
  if (!interval) return usage_error("--checkpoint-interval: {}", interval.error().message);
  auto stats = parse_stats(o.stats, stage_name(io.program, o.name));
  if (!stats) return stats.take_error();
  ErrorOptions errors;  // the commit stage reads any line: nothing is bad input
  auto bad = make_bad_input_handler(errors, stage_name(io.program, o.name), io);
  if (!bad) return bad.take_error();
  CommitStage stage(**store, stage_name(io.program, o.name), o, *interval, io);
  FilterSettings settings{o.input, std::move(*stats)};
  return run_filter(stage, settings, **bad, io);
}

Status run_checkpoint_show(const CheckpointOptions& o, Io& io) {
  auto table = use_table(o, io);
  if (!table) return table.take_error();
  auto store = read_state(o);
  if (!store) return store.take_error();
  auto offsets = (*store)->offsets();
  if (!offsets) return offsets.take_error();
  if (!*table) {
    for (const auto& s : *offsets) append_offset_json(io.out.buffer(), s);
    return {};
  }
  TextTable t({"TOPIC", "PARTITION", "OFFSET", "CHECKPOINT", "COMMITTED-AT"});
  for (const auto& s : *offsets)
    t.add_row({s.topic, std::to_string(s.partition), s.offset.text(),
               s.checkpoint > 0 ? std::to_string(s.checkpoint) : "-",
               format_rfc3339(s.committed_at)});
  io.out.write(t.render());
  return {};
}

Status run_checkpoint_history(const CheckpointOptions& o, Io& io) {
  if (o.plot.given) return plot_checkpoint_history(o, io);
  auto table = use_table(o, io);
  if (!table) return table.take_error();
  auto store = read_state(o);
  if (!store) return store.take_error();
  auto checkpoints = (*store)->checkpoints();
  if (!checkpoints) return checkpoints.take_error();
  auto snapshots = (*store)->snapshots();
  if (!snapshots) return snapshots.take_error();
  std::map<int64_t, std::vector<SnapshotRecord>> by_checkpoint;
  for (const auto& s : *snapshots) by_checkpoint[s.checkpoint].push_back(s);
  // TOOK: from the barrier's emission to the checkpoint's completion, what
  // a checkpoint costs the pipeline's latency (each stage's part is its
  // snapshot's saved_after_ms in ndjson).
  // P50, P99, MAX: end to end, the completion less the records' Kafka
  // timestamps, for the records the checkpoint covered.
  TextTable t({"CHECKPOINT", "EMITTED-AT", "COMPLETED-AT", "TOOK", "P50", "P99", "MAX", "BY",
               "PARTITIONS", "SNAPSHOTS", "ENTRIES", "BYTES"});
  std::string& out = io.out.buffer();
  for (const auto& c : *checkpoints) {
    const auto& snaps = by_checkpoint[c.id];
    int64_t entries = 0, bytes = 0;
    for (const auto& s : snaps) {
      entries += s.entries;
      bytes += s.bytes;
    }
    if (*table) {
      auto latency = [&](Millis Latency::*q) {
        return c.latency ? format_duration(std::max<Millis>((*c.latency).*q, 0)) : "-";
      };
      t.add_row({std::to_string(c.id), format_rfc3339(c.emitted_at),
                 c.completed_at ? format_rfc3339(*c.completed_at) : "-",
                 c.completed_at ? format_duration(*c.completed_at - c.emitted_at) : "-",
                 latency(&Latency::p50), latency(&Latency::p99), latency(&Latency::max),
                 c.completed_by.empty() ? "-" : c.completed_by, std::to_string(c.partitions),
                 std::to_string(snaps.size()), std::to_string(entries), std::to_string(bytes)});
      continue;
    }
    out.append("{\"checkpoint\":");
    append_int(out, c.id);
    out.append(",\"emitted_at\":\"");
    append_rfc3339(out, c.emitted_at);
    out.append("\",\"completed_at\":");
    if (c.completed_at) {
      out.push_back('"');
      append_rfc3339(out, *c.completed_at);
      out.push_back('"');
      out.append(",\"took_ms\":");
      append_int(out, *c.completed_at - c.emitted_at);
    } else {
      out.append("null,\"took_ms\":null");
    }
    out.append(",\"latency_ms\":");
    if (c.latency) {
      append_latency_json(out, *c.latency);
    } else {
      out.append("null");
    }
    out.append(",\"completed_by\":");
    if (c.completed_by.empty()) {
      out.append("null");
    } else {
      append_json_string(out, c.completed_by);
    }
    out.append(",\"partitions\":");
    append_int(out, c.partitions);
    out.append(",\"snapshots\":[");
    for (size_t i = 0; i < snaps.size(); ++i) {
      if (i > 0) out.push_back(',');
      out.append("{\"stage\":");
      append_json_string(out, snaps[i].stage);
      out.append(",\"entries\":");
      append_int(out, snaps[i].entries);
      out.append(",\"bytes\":");
      append_int(out, snaps[i].bytes);
      out.append(",\"saved_after_ms\":");
      append_int(out, snaps[i].saved_at - c.emitted_at);
      out.push_back('}');
    }
    out.append("]}\n");
  }
  if (*table) io.out.write(t.render());
  return {};
}

namespace {

// The plan printed, reset applies it with --execute, else only says so.
Status apply_plan(const CheckpointOptions& o, StateStore& store,
                  const std::vector<PartitionOffset>& plan, std::string_view what, Io& io) {
  if (!o.execute) {
    io.reporter.warning("dry run: nothing changed; add --execute to apply this plan");
    return {};
  }
  KPIPE_TRY(store.set_offsets(plan, io.clock.now()));
  io.reporter.info(fmt::format("reset {} {}", plan.size(), what));
  return {};
}

// A line of reset's plan in ndjson: a partition, where it is, where it
// goes (an offset as a number, a Kinesis position as a string).
void append_plan_line(std::string& out, const TopicPartition& tp,
                      const std::optional<Position>& current, const Position& target) {
  out.append("{\"topic\":");
  append_json_string(out, tp.topic);
  out.append(",\"partition\":");
  append_int(out, tp.partition);
  out.append(",\"current\":");
  if (current)
    current->append_json(out);
  else
    out.append("null");
  out.append(",\"offset\":");
  target.append_json(out);
  out.append("}\n");
}

// kcheckpoint reset -t kinesis:NAME: each shard of the stream to its trim
// horizon, or to the first record at or after a time (the position a
// shard started at a time keeps until it gives a record: kpipe(7), LOGS).
// A sequence number counts no records, so nothing moves by a count.
// Sequence numbers are not computed: where a shard resumes is the service's
// to find, when kconsume next reads it.
Status reset_kinesis(const CheckpointOptions& o, const ResetSpec& spec, const Scope& scope,
                     StateStore& store, const std::vector<StoredOffset>& stored, bool table,
                     Io& io) {
  if (spec.kind == ResetSpec::Kind::kShift || spec.kind == ResetSpec::Kind::kOffset)
    return usage_error(
        "--shift-by and --to-offset count records, which a Kinesis shard's sequence numbers do "
        "not: give --to-earliest, --to-latest, --to-datetime or --by-duration");
  auto log = KinesisLog::open(o.kinesis, std::string(kKinesisPrefix) + scope.topic, o.kafka.timeout,
                              io.reporter, io.clock);
  if (!log) return log.take_error();
  auto reader = log->reader();
  if (!reader) return reader.take_error();
  LogMetadata& metadata = *reader->log;
  auto ids = metadata.partitions(log->stream());
  if (!ids) return ids.take_error();
  std::vector<TopicPartition> parts;
  for (int32_t p : *ids)
    if (scope.partitions.empty() ||
        std::binary_search(scope.partitions.begin(), scope.partitions.end(), p))
      parts.push_back({log->stream(), p});
  if (parts.empty())
    return usage_error("nothing to reset: stream '{}' has none of those shards", log->stream());
  std::vector<Position> targets(parts.size(), Position(LogStart::kEarliest));
  if (spec.kind != ResetSpec::Kind::kEarliest) {
    Millis at = spec.kind == ResetSpec::Kind::kLatest ? LogStart::kLatest : spec.value;
    auto found = metadata.positions_at(parts, std::vector<Millis>(parts.size(), at));
    if (!found) return found.take_error();
    targets = std::move(*found);
  }
  std::map<TopicPartition, Position> current;
  for (const auto& s : stored) current[{s.topic, s.partition}] = s.offset;
  std::vector<PartitionOffset> plan;
  TextTable t({"TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"});
  std::string& out = io.out.buffer();
  for (size_t i = 0; i < parts.size(); ++i) {
    auto it = current.find(parts[i]);
    plan.push_back({parts[i].topic, parts[i].partition, targets[i]});
    if (table) {
      t.add_row({parts[i].topic, std::to_string(parts[i].partition),
                 it == current.end() ? "-" : it->second.text(), targets[i].text()});
      continue;
    }
    append_plan_line(out, parts[i],
                     it == current.end() ? std::nullopt : std::optional<Position>(it->second),
                     targets[i]);
  }
  if (table) io.out.write(t.render());
  return apply_plan(o, store, plan, "shards", io);
}

// Kafka's offsets only (reset, sync): a state that keeps a Kinesis shard's
// position is refused before any broker is asked (kpipe(7), LOGS).
Status check_kafka_offsets(const std::vector<StoredOffset>& stored, std::string_view why) {
  for (const auto& s : stored)
    if (!s.offset.is_offset())
      return failure("{} [{}] is kept at a Kinesis position ({}): {}", s.topic, s.partition,
                     s.offset, why);
  return {};
}

}  // namespace

Status run_checkpoint_reset(const CheckpointOptions& o, Io& io) {
  int kinds = o.to_earliest + o.to_latest + !o.to_datetime.empty() + !o.by_duration.empty() +
              o.shift_by.has_value() + o.to_offset.has_value();
  if (kinds != 1)
    return usage_error(
        "give exactly one of --to-earliest, --to-latest, --to-datetime, --by-duration, --shift-by, "
        "--to-offset");
  if (o.dry_run && o.execute) return usage_error("--dry-run and --execute cannot be combined");
  ResetSpec spec;
  if (o.to_latest) spec.kind = ResetSpec::Kind::kLatest;
  if (o.shift_by) spec = {ResetSpec::Kind::kShift, *o.shift_by};
  if (o.to_offset) spec = {ResetSpec::Kind::kOffset, *o.to_offset};
  if (!o.to_datetime.empty()) {
    auto t = parse_time_point(o.to_datetime, io.clock.now());
    if (!t) return usage_error("--to-datetime: {}", t.error().message);
    spec = {ResetSpec::Kind::kTime, *t};
  }
  if (!o.by_duration.empty()) {
    auto d = parse_duration(o.by_duration);
    if (!d) return usage_error("--by-duration: {}", d.error().message);
    spec = {ResetSpec::Kind::kTime, io.clock.now() - *d};
  }
  auto table = use_table(o, io);
  if (!table) return table.take_error();
  auto scopes = parse_scopes(o.topics);
  if (!scopes) return scopes.take_error();
  auto store = open_state(o);
  if (!store) return store.take_error();
  // A running pipeline would overwrite the new offsets at its next
  // checkpoint (kpipe(7), CONTROL LINES AND CHECKPOINTS): refused while its
  // kconsume runs, and taken before the plan is made, so that none starts
  // in between.
  if (o.execute) KPIPE_TRY((*store)->lock_offsets());
  auto stored = (*store)->offsets();
  if (!stored) return stored.take_error();
  size_t streams = std::count_if(scopes->begin(), scopes->end(),
                                 [](const Scope& scope) { return scope.kinesis; });
  if (streams > 0) {
    if (streams != scopes->size() || streams > 1)
      return usage_error("-t kinesis:NAME resets one Kinesis stream's shards: give it alone");
    return reset_kinesis(o, spec, scopes->front(), **store, *stored, *table, io);
  }
  std::map<TopicPartition, Position> current;
  // A reset computes offsets from a Kafka topic's bounds: a Kinesis shard
  // has none, and is reset by its stream's name.
  KPIPE_TRY(
      check_kafka_offsets(*stored, "a Kinesis stream's shards are reset with -t kinesis:NAME"));
  for (const auto& s : *stored) current[{s.topic, s.partition}] = s.offset;

  auto log = KafkaLog::open(o.kafka, io.env_brokers, io.reporter, io.clock);
  if (!log) return log.take_error();
  auto reader = log->reader({});
  if (!reader) return reader.take_error();
  LogMetadata& metadata = *reader->log;
  std::vector<TopicPartition> parts;
  if (scopes->empty()) {
    for (const auto& [tp, off] : current) parts.push_back(tp);
  } else {
    for (const auto& scope : *scopes) {
      auto ids = metadata.partitions(scope.topic);
      if (!ids) return ids.take_error();
      for (int32_t p : *ids) {
        if (!scope.partitions.empty() &&
            !std::binary_search(scope.partitions.begin(), scope.partitions.end(), p))
          continue;
        parts.push_back({scope.topic, p});
      }
    }
  }
  if (parts.empty())
    return usage_error("nothing to reset: the state holds no offsets; name topics with -t");
  auto marks = metadata.bounds(parts);
  if (!marks) return marks.take_error();
  std::vector<Position> at_time(parts.size(), 0);
  if (spec.kind == ResetSpec::Kind::kTime) {
    auto found = metadata.positions_at(parts, std::vector<Millis>(parts.size(), spec.value));
    if (!found) return found.take_error();
    at_time = *found;
  }
  std::vector<PartitionOffset> plan;
  TextTable t({"TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "LOG-START", "LOG-END"});
  std::string& out = io.out.buffer();
  for (size_t i = 0; i < parts.size(); ++i) {
    auto it = current.find(parts[i]);
    // Kafka's offsets, computed from the log's bounds.
    std::optional<int64_t> cur =
        it == current.end() ? std::nullopt : std::optional<int64_t>(it->second.offset());
    int64_t target =
        reset_target(spec, cur, (*marks)[i].low, (*marks)[i].high, at_time[i].offset());
    plan.push_back({parts[i].topic, parts[i].partition, target});
    if (*table) {
      t.add_row({parts[i].topic, std::to_string(parts[i].partition),
                 cur ? std::to_string(*cur) : "-", std::to_string(target),
                 std::to_string((*marks)[i].low), std::to_string((*marks)[i].high)});
      continue;
    }
    append_plan_line(out, parts[i], cur ? std::optional<Position>(*cur) : std::nullopt, target);
  }
  if (*table) io.out.write(t.render());
  return apply_plan(o, **store, plan, "partitions", io);
}

Status run_checkpoint_export(const CheckpointOptions& o, Io& io) {
  CheckpointOptions ndjson = o;
  ndjson.format = "ndjson";
  return run_checkpoint_show(ndjson, io);
}

Status run_checkpoint_import(const CheckpointOptions& o, Io& io) {
  auto store = open_state(o);
  if (!store) return store.take_error();
  // As reset: not while the pipeline's kconsume runs.
  KPIPE_TRY((*store)->lock_offsets());
  FieldSet fields;
  fields.add(FieldPath::parse(".topic").value());
  fields.add(FieldPath::parse(".partition").value());
  fields.add(FieldPath::parse(".offset").value());
  LineFeed inputs(o.input.inputs, o.input.max_line_bytes, &fields);
  std::vector<PartitionOffset> offsets;
  Line line;
  const ParsedLine* parsed = nullptr;
  // Every line is checked before anything changes: an import is all or
  // nothing.
  for (;;) {
    auto more = inputs.next(line, parsed);
    if (!more) return more.take_error();
    if (!*more) break;
    if (is_blank_line(line.text) || is_control_line(line.text)) continue;
    auto where = [&](std::string_view why) {
      return data_error("{}: line {}: {}", line.input, line.number, why);
    };
    if (line.too_long)
      return where(
          fmt::format("line is longer than {} bytes (--max-line-bytes)", o.input.max_line_bytes));
    if (!parsed->status.ok()) return where(parsed->status.error().message);
    const JsonField* v = parsed->values;
    if (v[0].type != JsonType::kString) return where("field 'topic' is missing or not a string");
    if (Status named = check_topic_name(v[0].str); !named.ok()) return where(named.error().message);
    if (v[1].type != JsonType::kNumber || !v[1].is_integer || v[1].integer < 0)
      return where("field 'partition' is missing or not a non-negative integer");
    // An offset, or a Kinesis position as export writes one (kpipe(7), LOGS).
    auto at = Position::from_json(v[2]);
    if (!at || (at->is_offset() && at->offset() < 0))
      return where(
          "field 'offset' is missing, or neither a non-negative integer nor a Kinesis position");
    offsets.push_back({std::string(v[0].str), static_cast<int32_t>(v[1].integer), std::move(*at)});
  }
  KPIPE_TRY((*store)->set_offsets(offsets, io.clock.now()));
  io.reporter.info(fmt::format("imported {} offsets", offsets.size()));
  return {};
}

Status run_checkpoint_sync(const CheckpointOptions& o, Io& io) {
  if (o.to_group.empty() == o.from_group.empty())
    return usage_error("give one of --to-group G or --from-group G");
  auto store = open_state(o);
  if (!store) return store.take_error();
  // --from-group rewrites the offsets, as reset does.
  if (!o.from_group.empty()) KPIPE_TRY((*store)->lock_offsets());
  {
    auto kept = (*store)->offsets();
    if (!kept) return kept.take_error();
    KPIPE_TRY(check_kafka_offsets(
        *kept, "sync copies offsets to and from a Kafka consumer group, and Kinesis has none"));
  }
  auto log = KafkaLog::open(o.kafka, io.env_brokers, io.reporter, io.clock);
  if (!log) return log.take_error();
  const std::string& group = o.to_group.empty() ? o.from_group : o.to_group;
  // --from-group only reads the group's offsets (OffsetFetch): Describe on
  // it and its topics is all a refusal asks for; --to-group commits (Read).
  KafkaLog::ReaderSettings settings;
  settings.group = group;
  settings.describe_only = !o.from_group.empty();
  auto reader = log->reader(settings);
  if (!reader) return reader.take_error();
  CommittedOffsets& offsets = *reader->offsets;
  auto stored = (*store)->offsets();
  if (!stored) return stored.take_error();
  if (!o.to_group.empty()) {
    std::vector<PartitionOffset> commit;
    for (const auto& s : *stored) commit.push_back({s.topic, s.partition, s.offset});
    if (commit.empty()) return usage_error("the state holds no offsets to copy");
    Status s = offsets.commit(commit);
    if (!s.ok() && is_not_authorized(s.error())) return s;
    if (!s.ok())
      return failure(
          "{} (a group with active members refuses outside commits: stop its consumers first)",
          s.error().message);
    io.reporter.info(fmt::format("copied {} offsets to group '{}'", commit.size(), group));
    return {};
  }
  auto scopes = parse_scopes(o.topics);
  if (!scopes) return scopes.take_error();
  std::set<TopicPartition> parts;
  for (const auto& s : *stored) parts.insert({s.topic, s.partition});
  for (const auto& scope : *scopes) {
    auto ids = reader->log->partitions(scope.topic);
    if (!ids) return ids.take_error();
    for (int32_t p : *ids)
      if (scope.partitions.empty() ||
          std::binary_search(scope.partitions.begin(), scope.partitions.end(), p))
        parts.insert({scope.topic, p});
  }
  if (parts.empty()) return usage_error("name the topics to copy with -t TOPIC");
  std::vector<TopicPartition> list(parts.begin(), parts.end());
  auto committed = offsets.committed(list);
  if (!committed) return committed.take_error();
  std::vector<PartitionOffset> copy;
  for (size_t i = 0; i < list.size(); ++i)
    if ((*committed)[i]) copy.push_back({list[i].topic, list[i].partition, *(*committed)[i]});
  if (copy.empty()) return failure("group '{}' has no committed offsets for these topics", group);
  KPIPE_TRY((*store)->set_offsets(copy, io.clock.now()));
  io.reporter.info(fmt::format("copied {} offsets from group '{}'", copy.size(), group));
  return {};
}

Status run_checkpoint_verify(const CheckpointOptions& o, Io& io) {
  auto store = read_state(o);
  if (!store) {
    // A file that cannot be read as a state database (damaged, say): what
    // SQLite's check finds in it, then why it could not be read.
    if (!o.state.empty())
      for (const auto& p : StateStore::check_file(o.state)) io.out.write_line(p);
    return store.take_error();
  }
  auto problems = (*store)->verify();
  if (!problems) return problems.take_error();
  for (const auto& p : *problems) io.out.write_line(p);
  const std::string& where = (*store)->db().path();  // a server's without its password
  if (!problems->empty())
    return failure("state database '{}' has {} problem{}", where, problems->size(),
                   problems->size() == 1 ? "" : "s");
  io.reporter.info(fmt::format("state database '{}' is sound", where));
  return {};
}

}  // namespace kpipe
