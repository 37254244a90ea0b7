#include "kpipe/stats.h"

#include "kpipe/json.h"

#include <cmath>
#include <iterator>

namespace kpipe {

StatsTicker::StatsTicker(std::string program, StatsSettings settings, Reporter& reporter,
                         Clock& clock)
    : program_(std::move(program)),
      interval_(settings.interval),
      settings_(std::move(settings)),
      reporter_(reporter),
      clock_(clock) {
  if (settings_.stage.empty()) settings_.stage = program_;
  start_ = clock_.steady();
  last_stats_ = start_;
  last_progress_ = start_;
  // The first tick writes the file: a scraper sees the stage from its start.
  last_metrics_ = start_ - kMetricsInterval;
}

bool StatsTicker::ticking() const {
  return interval_ > 0 || settings_.write_metrics != nullptr || reporter_.wants_progress();
}

void append_prometheus_label(std::string& out, std::string_view v) {
  // The text format escapes backslash, double quote and newline.
  for (char ch : v) {
    if (ch == '\\') {
      out.append("\\\\");
    } else if (ch == '"') {
      out.append("\\\"");
    } else if (ch == '\n') {
      out.append("\\n");
    } else {
      out.push_back(ch);
    }
  }
}

namespace {

struct MetricsText {
  std::string out;
  std::string labels;

  void add(std::string_view name, std::string_view type, std::string_view help, double value) {
    fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n{}{{{}}} ", name, help,
                   name, type, name, labels);
    append_double(out, value);
    out.push_back('\n');
  }
  void counter(std::string_view name, std::string_view help, uint64_t value) {
    add(name, "counter", help, static_cast<double>(value));
  }
  void gauge(std::string_view name, std::string_view help, double value) {
    add(name, "gauge", help, value);
  }
};

double seconds(Millis ms) {
  return static_cast<double>(ms) / 1000.0;
}

}  // namespace

std::string prometheus_metrics(std::string_view program, std::string_view stage, const Counters& c,
                               Millis now) {
  MetricsText m;
  m.labels = "program=\"";
  append_prometheus_label(m.labels, program);
  m.labels.append("\",stage=\"");
  append_prometheus_label(m.labels, stage);
  m.labels.push_back('"');
  m.counter("kpipe_records_in_total", "Records read.", c.in);
  m.counter("kpipe_records_out_total", "Records written.", c.out);
  m.counter("kpipe_records_dropped_total",
            "Records dropped on purpose (duplicates, filtered, late past the lateness).",
            c.dropped);
  m.counter("kpipe_records_late_total", "Records behind the watermark.", c.late);
  m.counter("kpipe_bad_lines_total", "Bad input lines, dead-lettered or skipped.",
            c.dead_lettered + c.skipped);
  m.counter("kpipe_dead_letters_total", "Bad input lines written to the dead-letter store.",
            c.dead_lettered);
  m.gauge("kpipe_state_size", "What the stage holds: keys, windows, rows.",
          static_cast<double>(c.state_size));
  m.counter("kpipe_checkpoints_total",
            "Checkpoints this stage saved its state at, or completed (the terminal stage).",
            c.checkpoints);
  if (c.checkpoint_at >= 0) {
    m.gauge("kpipe_checkpoint_duration_seconds",
            "The last checkpoint: from its barrier at the source to this stage.",
            seconds(c.checkpoint_took));
    m.gauge("kpipe_last_checkpoint_timestamp_seconds", "When the last checkpoint passed here.",
            seconds(c.checkpoint_at));
    m.gauge("kpipe_last_checkpoint_age_seconds", "Seconds since the last checkpoint passed here.",
            seconds(now - c.checkpoint_at));
  }
  if (c.latency) {
    // The last checkpoint's, as gauges: a summary's _sum and _count would
    // claim totals since the start.
    std::string labels = m.labels;
    m.out.append(
        "# HELP kpipe_end_to_end_latency_seconds The last checkpoint's records: its "
        "completion less their Kafka timestamps.\n"
        "# TYPE kpipe_end_to_end_latency_seconds gauge\n");
    for (auto [q, v] : {std::pair<const char*, Millis>{"0.5", c.latency->p50},
                        {"0.99", c.latency->p99},
                        {"1", c.latency->max}}) {
      fmt::format_to(std::back_inserter(m.out),
                     "kpipe_end_to_end_latency_seconds{{{},quantile=\"{}\"}} ", labels, q);
      append_double(m.out, seconds(v));
      m.out.push_back('\n');
    }
  }
  if (c.watermark) {
    m.gauge("kpipe_watermark_timestamp_seconds", "The event-time watermark.",
            seconds(*c.watermark));
    m.gauge("kpipe_watermark_lag_seconds", "How far the watermark trails the wall clock.",
            seconds(now - *c.watermark));
  }
  return std::move(m.out);
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

void StatsTicker::write_metrics(const Counters& c) {
  Status s =
      settings_.write_metrics(prometheus_metrics(program_, settings_.stage, c, clock_.now()));
  if (s.ok()) {
    metrics_failed_ = false;
  } else if (!metrics_failed_) {
    // Metrics are for watching the pipeline, not part of its work: a file
    // that cannot be written is said once, and tried again each time.
    metrics_failed_ = true;
    reporter_.warning(s.error().message);
  }
}

void StatsTicker::tick_now(const Counters& c) {
  Millis now = clock_.steady();
  if (settings_.write_metrics && now - last_metrics_ >= kMetricsInterval) {
    last_metrics_ = now;
    write_metrics(c);
  }
  if (interval_ > 0 && now - last_stats_ >= interval_) {
    last_stats_ = now;
    reporter_.stats(line(c, now));
  }
  if (reporter_.wants_progress() && now - last_progress_ >= 250) {
    last_progress_ = now;
    double seconds = static_cast<double>(now - start_) / 1000.0;
    double rate = seconds > 0 ? static_cast<double>(c.in) / seconds : 0;
    std::string left;
    if (c.left)
      left = rate >= 1 ? fmt::format(", {} left (~{})", *c.left,
                                     format_duration(static_cast<Millis>(
                                         std::ceil(static_cast<double>(*c.left) / rate) * 1000)))
                       : fmt::format(", {} left", *c.left);
    reporter_.progress(fmt::format(
        "{}: {} in, {} out, {:.0f}/s{}{}{}", program_, c.in, c.out, rate,
        c.dropped ? fmt::format(", {} dropped", c.dropped) : "",
        c.dead_lettered ? fmt::format(", {} dead-lettered", c.dead_lettered) : "", left));
  }
}

void StatsTicker::finish(const Counters& c) {
  if (reporter_.wants_progress()) reporter_.progress("");
  if (settings_.write_metrics) write_metrics(c);
  if (interval_ > 0) reporter_.stats(line(c, clock_.steady()));
}

}  // namespace kpipe
