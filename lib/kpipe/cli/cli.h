// The command-line layer: every program's options are declared through a
// Program, which parses them, runs the library, and is the one place where
// an Error becomes a one-line diagnostic and an exit status.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kpipe/kafka/config.h"
#include "kpipe/kinesis/kinesis_log.h"
#include "kpipe/report.h"
#include "kpipe/schema_options.h"
#include "kpipe/stage/filter.h"
#include "kpipe/status.h"

namespace kpipe::cli {

// Writes diagnostics to standard error as "PROGRAM: warning: ...". Safe to
// call from librdkafka's threads. When standard error is the journal
// (systemd's JOURNAL_STREAM names it), each line starts with its syslog
// priority ("<4>" for a warning), so that `journalctl -p warning` filters.
class StderrReporter final : public Reporter {
 public:
  explicit StderrReporter(std::string program);
  // `journal_stream`: JOURNAL_STREAM's value ("DEVICE:INODE"), or null.
  StderrReporter(std::string program, const char* journal_stream, int fd);
  void set_verbosity(int v) { verbosity_ = v; }
  void warning(std::string_view m) override;
  void info(std::string_view m) override;
  void debug(std::string_view m) override;
  void stats(std::string_view line) override;
  void progress(std::string_view line) override;
  bool wants_progress() const override { return tty_ && verbosity_ >= 0; }
  void error(std::string_view m);

 private:
  void emit(std::string_view priority, std::string_view kind, std::string_view m);
  void write(std::string& text);
  std::string program_;
  int fd_ = 2;
  bool journal_ = false;
  int verbosity_ = 0;  // -1 quiet, 1 -v, 2 -vv
  bool tty_;
  bool progress_shown_ = false;
  std::mutex mu_;
};

class Program {
 public:
  Program(std::string name, std::string description);

  CLI::App& app() { return app_; }
  const std::string& name() const { return name_; }

  // Shared option groups: the same name means the same thing everywhere.
  void add_inputs(CLI::App& app, InputOptions& o);
  void add_errors(CLI::App& app, ErrorOptions& o);
  void add_stats(CLI::App& app, StatsOptions& o);
  void add_kafka(CLI::App& app, KafkaOptions& o);
  // --plot [FILE]; `what` ends its help: "the lag history".
  void add_plot(CLI::App& app, PlotOptions& o, const std::string& what);
  // --key-format, --value-format and the Schema Registry's options, for
  // reading (kconsume) or for writing (kproduce).
  void add_schema(SchemaOptions& o, bool writing);
  void add_inputs(InputOptions& o) { add_inputs(app_, o); }
  void add_errors(ErrorOptions& o) { add_errors(app_, o); }
  void add_stats(StatsOptions& o) { add_stats(app_, o); }
  void add_kafka(KafkaOptions& o) { add_kafka(app_, o); }
  // --region and --endpoint, for -t kinesis:NAME (and AWS's variables).
  void add_kinesis(CLI::App& app, KinesisOptions& o);
  void add_kinesis(KinesisOptions& o) { add_kinesis(app_, o); }
  // A subcommand that gets -q/-v and the completion helper too.
  CLI::App* add_subcommand(const std::string& name, const std::string& description);

  // Parses, runs `body`, and returns the process's exit status.
  int run(int argc, char** argv, const std::function<Status(Io&)>& body);

 private:
  void add_common(CLI::App& app);
  std::string name_;
  CLI::App app_;
  int verbose_ = 0;
  bool quiet_ = false;
  // Run once the command line is parsed: what only the parse can tell,
  // such as an option given without its optional value.
  std::vector<std::function<void()>> after_parse_;
  StderrReporter reporter_;
};

// The exit status for an Error, after printing it (stdout flushed first).
int report_error(StderrReporter& reporter, const Error& e);

// Whether `fd` is the stream that JOURNAL_STREAM ("DEVICE:INODE") names.
bool is_journal_stream(const char* journal_stream, int fd);

// systemd's notification socket (NOTIFY_SOCKET), through libsystemd's
// sd_notify; null when the program does not run under a service manager
// that listens.
std::unique_ptr<ServiceNotifier> make_service_notifier();

}  // namespace kpipe::cli
