// How the library speaks to the person running it without printing: it
// hands one-line messages to a Reporter, and the command-line layer decides
// what reaches standard error (-q, -v, a terminal's progress line).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kpipe {

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void warning(std::string_view message) = 0;
  // Shown with -v: summaries at exit, what a program decided and why.
  virtual void info(std::string_view message) = 0;
  // Shown with -vv: librdkafka's own log lines, for example.
  virtual void debug(std::string_view message) { (void)message; }
  // One NDJSON line of counters (--stats).
  virtual void stats(std::string_view line) = 0;
  // A live progress line, replaced in place; ignored unless standard
  // error is a terminal.
  virtual void progress(std::string_view line) { (void)line; }
  virtual bool wants_progress() const { return false; }
};

// Tells the service manager how the program is doing (systemd's
// sd_notify: "READY=1", "WATCHDOG=1", "STATUS=..."), one state at a time.
// Null where nothing listens.
class ServiceNotifier {
 public:
  virtual ~ServiceNotifier() = default;
  virtual void notify(std::string_view state) = 0;
};

}  // namespace kpipe
