// A filter built from the core and stage libraries alone (tests/CMakeLists
// links nothing else): if run_filter ever needs Kafka or SQLite again, this
// stops linking. It upper-cases the field .name of each line, passes
// control lines on, and skips bad lines, as a small kpipe stage would.
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "kpipe/json.h"
#include "kpipe/report.h"
#include "kpipe/stage/bad_input.h"
#include "kpipe/stage/filter.h"
#include "kpipe/time.h"

namespace {

class NameStage final : public kpipe::LineStage {
 public:
  NameStage() { fields_.add(kpipe::FieldPath::parse(".name").value()); }
  kpipe::Status on_line(const kpipe::Line& line, kpipe::Output& out) override {
    KPIPE_TRY(reader_.read(line.text, fields_, values_));
    const kpipe::JsonField& name = values_[0];
    if (name.type != kpipe::JsonType::kString)
      return kpipe::data_error("field '.name' is not a string");
    std::string upper(name.str);
    for (char& c : upper)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    out.write_line(upper);
    return {};
  }

 private:
  kpipe::FieldSet fields_;
  kpipe::JsonReader reader_;
  std::vector<kpipe::JsonField> values_;
};

class StderrReporter final : public kpipe::Reporter {
 public:
  void warning(std::string_view m) override {
    std::fprintf(stderr, "stage_only: warning: %.*s\n", int(m.size()), m.data());
  }
  void info(std::string_view) override {}
  void stats(std::string_view) override {}
};

}  // namespace

int main() {
  kpipe::SystemClock clock;
  StderrReporter reporter;
  kpipe::Output out(1);
  std::atomic<bool> stop{false};
  kpipe::Io io{out, reporter, clock, &stop, "stage_only"};
  kpipe::BadInputHandler bad(kpipe::OnError::kSkip, nullptr, "stage_only", clock);
  NameStage stage;
  kpipe::FilterSettings settings;
  kpipe::Status s = kpipe::run_filter(stage, settings, bad, io);
  if (!s.ok()) {
    std::fprintf(stderr, "stage_only: error: %s\n", s.error().message.c_str());
    return 1;
  }
  return 0;
}
