#include "kpipe/stats.h"

#include "kpipe/json.h"

namespace kpipe {

StatsTicker::StatsTicker(std::string program, Millis interval, Reporter& reporter, Clock& clock)
    : program_(std::move(program)), interval_(interval), reporter_(reporter), clock_(clock) {
  start_ = clock_.steady();
  last_stats_ = start_;
  last_progress_ = start_;
}

std::string StatsTicker::line(const Counters& c, Millis now) const {
  std::string out = "{\"program\":";
  append_json_string(out, program_);
  out.append(",\"at\":\"");
  append_rfc3339(out, clock_.now());
  out.append("\",\"in\":");
  append_uint(out, c.in);
  out.append(",\"out\":");
  append_uint(out, c.out);
  double seconds = static_cast<double>(now - start_) / 1000.0;
  out.append(",\"rate\":");
  append_double(out, seconds > 0 ? static_cast<double>(
                                       static_cast<uint64_t>(static_cast<double>(c.in) / seconds))
                                 : 0.0);
  out.append(",\"dropped\":");
  append_uint(out, c.dropped);
  out.append(",\"late\":");
  append_uint(out, c.late);
  out.append(",\"dead_lettered\":");
  append_uint(out, c.dead_lettered);
  out.append(",\"skipped\":");
  append_uint(out, c.skipped);
  out.append(",\"state_size\":");
  append_uint(out, c.state_size);
  out.push_back('}');
  return out;
}

void StatsTicker::tick_now(const Counters& c) {
  Millis now = clock_.steady();
  if (interval_ > 0 && now - last_stats_ >= interval_) {
    last_stats_ = now;
    reporter_.stats(line(c, now));
  }
  if (reporter_.wants_progress() && now - last_progress_ >= 250) {
    last_progress_ = now;
    double seconds = static_cast<double>(now - start_) / 1000.0;
    double rate = seconds > 0 ? static_cast<double>(c.in) / seconds : 0;
    reporter_.progress(
        fmt::format("{}: {} in, {} out, {:.0f}/s{}{}", program_, c.in, c.out, rate,
                    c.dropped ? fmt::format(", {} dropped", c.dropped) : "",
                    c.dead_lettered ? fmt::format(", {} dead-lettered", c.dead_lettered) : ""));
  }
}

void StatsTicker::finish(const Counters& c) {
  if (reporter_.wants_progress()) reporter_.progress("");
  if (interval_ > 0) reporter_.stats(line(c, clock_.steady()));
}

}  // namespace kpipe
