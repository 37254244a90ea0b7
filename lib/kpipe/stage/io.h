// NDJSON out over file descriptors, buffered, and what a program's run
// function receives from the outside world (Io) with the options every
// line-reading program shares.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/control.h"
#include "kpipe/line.h"
#include "kpipe/report.h"
#include "kpipe/stats.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// A buffered writer. A closed downstream pipe (EPIPE) is a normal end:
// closed() turns true and writes are dropped, so callers stop quietly.
//
// Written is not delivered: a pipe holds what it was given until its
// reader reads it, and a reader that dies takes the pipe's contents with
// it. bytes_delivered() counts what the reader of a pipe or FIFO has taken
// (kpipe(7), CONTROL LINES AND CHECKPOINTS); a program marks records done
// (an offset committed, a checkpoint completed, an entry replayed) only
// once their bytes are delivered.
// The capacity kpipe asks of the pipes it reads and writes (kpipe(7),
// LINES): pipe-max-size's default, 1 MiB.
constexpr size_t kPipeBytes = size_t{1} << 20;
// Asks a pipe of Linux's default size for kPipeBytes; a pipe sized on
// purpose, or one that cannot grow, stays as it was.
void widen_pipe(int fd);

class Output {
 public:
  explicit Output(int fd, std::string name = "<stdout>", size_t flush_at = 1u << 16);
  ~Output();
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  // Opens (creating or appending) a file, or standard output for "-".
  static Expected<std::unique_ptr<Output>> open_append(const std::string& path);
  // An Output that closes `fd` when destroyed (a pipe to a child process:
  // the child sees the end of its input then).
  static std::unique_ptr<Output> owning(int fd, std::string name);

  // The buffer, for writers that build a record in place.
  std::string& buffer() { return buf_; }
  void write(std::string_view bytes) { buf_.append(bytes); }
  void write_line(std::string_view bytes) {
    buf_.append(bytes);
    buf_.push_back('\n');
  }
  // Flushes when enough has accumulated; call after each record.
  Status end_record() { return buf_.size() >= flush_at_ ? flush() : Status(); }
  Status flush();

  // Once this returns true (SIGINT, SIGTERM), a reader that stopped
  // reading gets a grace period, then flush() gives up instead of waiting
  // forever on a full pipe.
  void set_stop_check(std::function<bool()> stop) { stop_ = std::move(stop); }

  // Timers must fire while a slow reader holds a write up (commits, --stats):
  // with a hook set, a write into a full pipe or FIFO waits in poll(), and
  // the hook is called about every kTickMs while it waits, while
  // wait_delivered() waits, and once when the reader is found gone. It must
  // not write to this Output. Its error ends the flush or the wait.
  static constexpr int kTickMs = 100;
  void set_tick_hook(std::function<Status()> hook) { tick_ = std::move(hook); }

  bool closed() const { return closed_; }
  // Checks, without writing, whether the reader of a pipe has gone (so
  // that a program waiting for input notices `| head` ending). Sets
  // closed() when it has.
  bool check_closed();
  uint64_t bytes_written() const { return bytes_written_; }
  // Where the output ends once the buffer is written: the position of the
  // end of the last record, for bytes_delivered() to reach.
  uint64_t end_position() const { return bytes_written_ + buf_.size(); }
  // What the reader has taken: the bytes written minus those the pipe or
  // FIFO still holds (Linux's FIONREAD). A regular file, a terminal or a
  // socket takes what is written. Still right after the reader has gone.
  uint64_t bytes_delivered() const;

  enum class Drain { kDelivered, kClosed, kStopped, kTimedOut };
  static constexpr Millis kNoLimit = -1;
  // Flushes, then waits until bytes_delivered() reaches `position`, the
  // reader goes (kClosed), a stop was asked for and the reader did not
  // catch up within the grace period (kStopped), or `limit` passes.
  Expected<Drain> wait_delivered(uint64_t position, Millis limit = kNoLimit);
  // How long waits for the reader took, in total: wait_delivered(), and
  // writes into a full pipe while a tick hook is set.
  Millis blocked_ms() const { return blocked_ms_; }

  const std::string& name() const { return name_; }
  int fd() const { return fd_; }

 private:
  Status write_buffer();
  Status wait_writable();
  // Calls the hook if kTickMs passed since it last ran.
  Status tick();
  // EPIPE, or POLLERR: closed(), the buffer dropped, the hook called once.
  Status reader_gone();
  int nonblocking_fd();

  int fd_;
  bool owns_fd_ = false;
  bool is_pipe_ = false;
  // The pipe opened a second time, non-blocking, for writes that must not
  // hold up the tick hook; -1 until needed, -2 when it cannot be had.
  int nb_fd_ = -1;
  std::string name_;
  size_t flush_at_;
  std::string buf_;
  bool closed_ = false;
  bool in_tick_ = false;
  uint64_t bytes_written_ = 0;
  Millis blocked_ms_ = 0;
  Millis last_tick_ = 0;
  Status hook_error_;  // from a hook called where no Status can be returned
  Status dropped_;     // output given up (a stop, a write error): every later flush fails so
  std::function<bool()> stop_;
  std::function<Status()> tick_;
};

// Writes all of `bytes` to `fd`, retrying short writes and EINTR.
Status write_all(int fd, std::string_view bytes, const std::string& name);

// What a program's run function receives from the outside world; tests
// build one with a fake clock, a recording reporter and a pipe or file.
struct Io {
  Output& out;
  Reporter& reporter;
  Clock& clock;
  const std::atomic<bool>* stop = nullptr;
  std::string program;                // "kdedup"
  const char* env_brokers = nullptr;  // KPIPE_BROKERS, for kafka: targets
  bool interactive = false;           // standard output is a terminal
  // The terminal's width in columns when standard output is one, else
  // $COLUMNS, else 80: what a chart drawn in text must fit.
  size_t columns = 80;
  // The service manager, when the program runs under one (systemd's
  // NOTIFY_SOCKET); the terminal stage tells it of checkpoints.
  ServiceNotifier* notifier = nullptr;
};

// Options every line-reading program takes.
struct InputOptions {
  std::vector<std::string> inputs;  // files; "-" or none: standard input
  size_t max_line_bytes = kDefaultMaxLineBytes;
};

struct ErrorOptions {
  std::string on_error;  // fail, dlq or skip; empty: dlq with --dlq, else fail
  std::string dlq;       // FILE.db or kafka:TOPIC
};

// --plot [FILE] (klag, kcheckpoint history): a picture instead of the
// report. FILE: SVG written there; "-": SVG on standard output; no FILE:
// the chart in block characters on standard output.
struct PlotOptions {
  bool given = false;
  std::string file;
};

struct StatsOptions {
  std::string stats;    // a duration, or empty
  std::string metrics;  // --metrics FILE, or empty
};

// Waits until standard input, when it is one of the inputs, has a line to
// read or has ended, or a stop is asked for. A stateful stage restores its
// state only then: the pipeline's kconsume may complete a checkpoint in
// the state store before it writes its first line (kpipe(7), EXACTLY ONCE
// INTO KAFKA). Files are there at once.
// (`fd` is standard input's descriptor, for tests.)
Status wait_for_input(const InputOptions& input, const std::atomic<bool>* stop, int fd = 0);

// wait_for_input, then a look at standard input's first line without
// reading it (a pipe's through tee(2), a file's through pread(2)): the
// kconsume of a consumer group's instance writes its instance line first
// (kpipe(7), MANY INSTANCES), and the stages lock their names within that
// instance, and kproduce --transactional takes the instance's
// transactional id, before they restore or fence anything. nullopt when
// the first line is another, the input ended or was stopped, or the inputs
// are not standard input alone or one file (whose first line counts). A
// malformed instance line is a data_error.
Expected<std::optional<InstanceLine>> await_instance(const InputOptions& input,
                                                     const std::atomic<bool>* stop, int fd = 0);

// "kdedup", or "kdedup/NAME" when --name differs from the program's name.
std::string stage_name(const std::string& program, const std::string& name);

// --stats and --metrics: the interval, and a writer of the metrics file
// (whose folder must exist). `stage` names the stage in the metrics.
Expected<StatsSettings> parse_stats(const StatsOptions& options, std::string stage);

// Writes `text` to `path` whole or not at all: a temporary file beside it,
// renamed over it, so that a reader never sees half of it.
Status write_file_atomically(const std::string& path, std::string_view text);

// Refuses an input that is also an output (`kdedup --dups f f`, or
// `kdedup f >> f`): the program would read what it writes, and grow the
// file without end. `outputs` pairs each output with what it is
// ("standard output", "the --dups file").
Status check_inputs_are_not_outputs(
    const std::vector<std::string>& inputs,
    const std::vector<std::pair<std::string, const Output*>>& outputs);

}  // namespace kpipe
