#include "kpipe/lag_plot.h"

#include <algorithm>
#include <map>

#include "kpipe/time.h"

namespace kpipe {

namespace {

// One subject's samples restricted to `topics`: samples left without a
// partition are dropped, since they say nothing of the topics drawn.
std::vector<LagSample> only_topics(const std::vector<LagSample>& history,
                                   const std::vector<std::string>& topics) {
  std::vector<LagSample> out;
  for (const auto& s : history) {
    LagSample kept;
    kept.subject = s.subject;
    kept.at = s.at;
    kept.members = s.members;
    kept.group_state = s.group_state;
    for (const auto& p : s.partitions)
      if (std::find(topics.begin(), topics.end(), p.topic) != topics.end())
        kept.partitions.push_back(p);
    if (!kept.partitions.empty()) out.push_back(std::move(kept));
  }
  return out;
}

std::string topics_text(const std::vector<std::string>& topics) {
  std::string out;
  for (size_t i = 0; i < topics.size(); ++i)
    out += fmt::format("{}'{}'",
                       i > 0               ? ", "
                       : topics.size() > 1 ? " on topics "
                                           : " on topic ",
                       topics[i]);
  return out;
}

// A sample's time to the second, as a subtitle needs it: "2026-11-29T10:15:30Z".
std::string second_text(Millis t) {
  std::string out = format_rfc3339(t - floor_mod(t, kSecond));
  auto dot = out.rfind(".000");
  if (dot != std::string::npos) out.erase(dot, 4);
  return out;
}

// A series in records and one in seconds, built a sample at a time.
struct SeriesPair {
  PlotSeries records;
  PlotSeries seconds;
};

// Accumulates one sample's partitions into a series' point: their lags
// summed, their largest lag in seconds.
struct Point {
  int64_t lag = 0;
  bool has_lag = false;
  double seconds = 0;
  bool has_seconds = false;

  void add(const PartitionSample& p) {
    if (auto l = p.lag()) {
      lag += *l;
      has_lag = true;
    }
    if (p.lag_seconds && (!has_seconds || *p.lag_seconds > seconds)) {
      seconds = *p.lag_seconds;
      has_seconds = true;
    }
  }
  void put(Millis at, SeriesPair& into) const {
    if (has_lag) into.records.points.push_back({at, static_cast<double>(lag)});
    if (has_seconds) into.seconds.points.push_back({at, seconds});
  }
};

// The series of one subject's samples, in the order of their names'
// keys (the group; its topics; its partitions).
std::vector<SeriesPair> subject_series(const std::vector<LagSample>& history, LagSeriesBy by,
                                       const std::string& prefix) {
  if (by == LagSeriesBy::kGroup) {
    std::vector<SeriesPair> out(1);
    out[0].records.name = out[0].seconds.name = prefix;
    for (const auto& s : history) {
      Point point;
      for (const auto& p : s.partitions) point.add(p);
      point.put(s.at, out[0]);
    }
    return out;
  }
  // Keyed by topic (partition -1) or by partition. A history's samples
  // mostly hold the same partitions in the same order: the series of the
  // same position in the sample before is tried first, then the map.
  struct Keyed {
    TopicPartition key;
    SeriesPair pair;
  };
  std::map<TopicPartition, Keyed> series;
  std::vector<Keyed*> previous, current;
  for (const auto& s : history) {
    current.clear();
    Point point;
    Keyed* into = nullptr;
    for (size_t j = 0; j < s.partitions.size(); ++j) {
      const PartitionSample& p = s.partitions[j];
      int32_t id = by == LagSeriesBy::kTopic ? -1 : p.partition;
      auto is = [&](const Keyed* k) {
        return k != nullptr && k->key.partition == id && k->key.topic == p.topic;
      };
      if (!is(into)) {
        if (into != nullptr) point.put(s.at, into->pair);
        point = Point{};
        if (j < previous.size() && is(previous[j])) {
          into = previous[j];
        } else {
          auto [it, added] = series.try_emplace({p.topic, id});
          if (added) {
            std::string name =
                by == LagSeriesBy::kTopic ? p.topic : fmt::format("{}[{}]", p.topic, p.partition);
            if (!prefix.empty()) name = prefix + " " + name;
            it->second.key = it->first;
            it->second.pair.records.name = it->second.pair.seconds.name = std::move(name);
          }
          into = &it->second;
        }
      }
      point.add(p);
      current.push_back(into);
    }
    if (into != nullptr) point.put(s.at, into->pair);
    previous.swap(current);
  }
  std::vector<SeriesPair> out;
  out.reserve(series.size());
  for (auto& [key, keyed] : series) out.push_back(std::move(keyed.pair));
  return out;
}

}  // namespace

Expected<Chart> lag_chart(const std::vector<std::vector<LagSample>>& histories,
                          const LagEngine& engine, const LagPlotOptions& options) {
  if (histories.empty()) return failure("history '{}' holds no samples to draw", options.history);
  // With -t, each history restricted to those topics; without, as given.
  std::vector<std::vector<LagSample>> filtered;
  if (!options.topics.empty())
    for (const auto& h : histories) filtered.push_back(only_topics(h, options.topics));
  const auto& drawn = options.topics.empty() ? histories : filtered;

  for (size_t i = 0; i < drawn.size(); ++i) {
    size_t n = drawn[i].size();
    if (n >= 2) continue;
    const LagSubject& subject = histories[i].empty() ? LagSubject{} : histories[i].front().subject;
    return failure("history '{}' holds {} of {}{}: a plot needs at least two", options.history,
                   n == 0 ? "no samples" : "1 sample", subject_text(subject),
                   topics_text(options.topics));
  }

  bool several = drawn.size() > 1;
  Chart chart;
  PlotPanel records{"lag (records)", PlotUnit::kCount, {}};
  PlotPanel seconds{"lag (seconds)", PlotUnit::kSeconds, {}};
  size_t samples = 0;
  Millis from = 0, to = 0;
  for (const auto& history : drawn) {
    const LagSubject& subject = history.front().subject;
    // A group's series are named by the group when it is drawn alone by
    // group, and prefixed with it among several.
    std::string prefix =
        options.by == LagSeriesBy::kGroup || several ? subject.name : std::string();
    for (auto& pair : subject_series(history, options.by, prefix)) {
      if (!pair.records.points.empty()) records.series.push_back(std::move(pair.records));
      if (!pair.seconds.points.empty()) seconds.series.push_back(std::move(pair.seconds));
    }
    if (samples == 0 || history.front().at < from) from = history.front().at;
    if (samples == 0 || history.back().at > to) to = history.back().at;
    samples += history.size();

    // The verdict's changes, as klag would have judged each sample.
    auto statuses = engine.statuses(history, options.depth);
    for (size_t i = 0; i < statuses.size(); ++i) {
      LagStatus before = i == 0 ? LagStatus::kOk : statuses[i - 1];
      if (statuses[i] == before) continue;
      std::string label = lag_status_name(statuses[i]);
      if (several) label = subject.name + ": " + label;
      chart.marks.push_back({history[i].at, std::move(label), static_cast<int>(statuses[i])});
    }
  }
  std::stable_sort(chart.marks.begin(), chart.marks.end(),
                   [](const PlotMark& a, const PlotMark& b) { return a.at < b.at; });

  records.series = fold_series(std::move(records.series), options.series, PlotFold::kSum);
  chart.panels.push_back(std::move(records));
  if (!seconds.series.empty()) {
    seconds.series = fold_series(std::move(seconds.series), options.series, PlotFold::kMax);
    chart.panels.push_back(std::move(seconds));
  }

  const LagSubject& first = drawn.front().front().subject;
  chart.title = several ? fmt::format("klag: lag of {} {}s", drawn.size(), first.kind_name())
                        : fmt::format("klag: lag of {}", subject_text(first));
  chart.subtitle =
      fmt::format("history {}{}: {} samples from {} to {}", options.history,
                  topics_text(options.topics), samples, second_text(from), second_text(to));
  return chart;
}

}  // namespace kpipe
