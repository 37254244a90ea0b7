// Fakes for what the outside world decides: the clock and the reporter.
// Tests inject them where a program gets the real ones (kpipe::Io).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kpipe/report.h"
#include "kpipe/time.h"

namespace kpipe {

// A clock that moves only when told to (ninja's VirtualFileSystem::Tick()).
class FakeClock final : public Clock {
 public:
  explicit FakeClock(Millis start = 0) : now_(start), steady_(0) {}
  Millis now() override { return now_; }
  Millis steady() override { return steady_; }
  // Time passes at once: a test never sleeps.
  void sleep_for(Millis d) override {
    if (d > 0) advance(d);
  }
  void advance(Millis d) {
    now_ += d;
    steady_ += d;
  }
  void set(Millis t) { now_ = t; }

 private:
  Millis now_;
  Millis steady_;
};

// Keeps everything it is told.
class RecordingReporter final : public Reporter {
 public:
  void warning(std::string_view m) override { warnings.emplace_back(m); }
  void info(std::string_view m) override { infos.emplace_back(m); }
  void stats(std::string_view m) override { stats_lines.emplace_back(m); }
  std::vector<std::string> warnings, infos, stats_lines;
};

}  // namespace kpipe
