#include "kpipe/kinesis/stream_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <limits>

#include "kpipe/json.h"

namespace kpipe {

namespace {

std::string stream_field(std::string_view stream) {
  std::string out = R"({"StreamName":)";
  append_json_string(out, stream);
  return out;
}

}  // namespace

std::string shard_iterator_body(std::string_view stream, std::string_view shard,
                                const ShardStart& start) {
  std::string out = stream_field(stream);
  out += R"(,"ShardId":)";
  append_json_string(out, shard);
  switch (start.kind) {
    case ShardStart::Kind::kTrimHorizon:
      out += R"(,"ShardIteratorType":"TRIM_HORIZON"})";
      break;
    case ShardStart::Kind::kLatest:
      out += R"(,"ShardIteratorType":"LATEST"})";
      break;
    case ShardStart::Kind::kAtTimestamp:
      // JSON 1.1's times: epoch seconds, the milliseconds as a fraction.
      out += fmt::format(R"(,"ShardIteratorType":"AT_TIMESTAMP","Timestamp":{}.{:03}}})",
                         floor_div(start.time, 1000), floor_mod(start.time, 1000));
      break;
    case ShardStart::Kind::kAfterSequence:
      out += R"(,"ShardIteratorType":"AFTER_SEQUENCE_NUMBER","StartingSequenceNumber":)";
      append_json_string(out, start.sequence);
      out += "}";
      break;
  }
  return out;
}

StreamReader::StreamReader(KinesisClient& client, std::string stream, Clock& clock)
    : StreamReader(client, stream, std::make_unique<PollingFetcher>(client, stream, clock)) {}

StreamReader::StreamReader(KinesisClient& client, std::string stream,
                           std::unique_ptr<ShardFetcher> fetcher)
    : client_(client), stream_(std::move(stream)), fetcher_(std::move(fetcher)) {}

Expected<std::vector<Shard>> list_shards(KinesisClient& client, const std::string& stream) {
  std::vector<Shard> out;
  std::string token;
  do {
    // A page after the first names only its token (the API refuses both).
    std::string body;
    if (token.empty()) {
      body = stream_field(stream) + "}";
    } else {
      body = R"({"NextToken":)";
      append_json_string(body, token);
      body += "}";
    }
    auto answer = client.call("ListShards", body);
    if (!answer) return answer.take_error();
    auto page = parse_list_shards(*answer);
    if (!page) return page.take_error();
    for (auto& s : page->shards) out.push_back(std::move(s));
    token = page->next_token;
  } while (!token.empty());
  return out;
}

Status StreamReader::open(Starts starts) {
  starts_ = std::move(starts);
  auto shards = list_shards(client_, stream_);
  if (!shards) return shards.take_error();
  for (const auto& s : *shards) lineage_.add(s);
  return {};
}

namespace {

// GetShardIterator's answer: the iterator, or an error naming the shard.
Expected<std::string> iterator_of(std::string_view answer, const Shard& shard,
                                  const std::string& stream) {
  simdjson::dom::parser parser;
  std::string_view iterator;
  if (parser.parse(answer).get_object()["ShardIterator"].get(iterator) != simdjson::SUCCESS ||
      iterator.empty())
    return failure("kinesis GetShardIterator: no iterator for {} of stream '{}'", shard.id, stream);
  return std::string(iterator);
}

}  // namespace

Expected<std::optional<Millis>> first_arrival(KinesisClient& client, const std::string& stream,
                                              const Shard& shard, const ShardStart& start,
                                              Clock& clock, Millis timeout) {
  Millis deadline = clock.steady() + timeout;
  auto answer = client.call("GetShardIterator", shard_iterator_body(stream, shard.id, start));
  if (!answer) return answer.take_error();
  auto iterator = iterator_of(*answer, shard, stream);
  if (!iterator) return iterator.take_error();
  std::string next = std::move(*iterator);
  for (bool first = true;; first = false) {
    if (!first) clock.sleep_for(kGetRecordsInterval);
    std::string body = R"({"ShardIterator":)";
    append_json_string(body, next);
    body += R"(,"Limit":1})";
    auto got = client.call("GetRecords", body);
    if (!got) return got.take_error();
    auto page = parse_get_records(*got);
    if (!page) return page.take_error();
    if (!page->records.empty()) return std::optional<Millis>(page->records.front().arrival);
    if (!page->next_iterator || page->millis_behind == 0) return std::optional<Millis>();
    if (clock.steady() + kGetRecordsInterval > deadline)
      return failure(
          "kinesis: {} of stream '{}' gave no record within {}, though {} ms behind its tip",
          shard.id, stream, format_duration(timeout), page->millis_behind);
    next = std::move(*page->next_iterator);
  }
}

PollingFetcher::PollingFetcher(KinesisClient& client, std::string stream, Clock& clock)
    : client_(client), stream_(std::move(stream)), clock_(clock) {}

Status PollingFetcher::fetch_one(const Shard& shard, Cursor& cursor, const StartOf& start_of,
                                 const Got& got) {
  if (cursor.iterator.empty()) {
    auto answer =
        client_.call("GetShardIterator", shard_iterator_body(stream_, shard.id, start_of(shard)));
    if (!answer) return answer.take_error();
    auto iterator = iterator_of(*answer, shard, stream_);
    if (!iterator) return iterator.take_error();
    cursor.iterator = std::move(*iterator);
  }
  Millis sent = clock_.steady();
  cursor.due = sent + kGetRecordsInterval;
  ++calls_;
  std::string body = R"({"ShardIterator":)";
  append_json_string(body, cursor.iterator);
  body += fmt::format(R"(,"Limit":{}}})", kGetRecordsLimit);
  auto answer = client_.call("GetRecords", body);
  if (!answer) {
    // An iterator lives five minutes; one that expired (or that
    // kinesis-mock no longer knows: HTTP 500 and no body) is asked for
    // again, after the last record read, at the next call.
    const KinesisError& e = client_.last_error();
    if (e.type == "ExpiredIteratorException" || (client_.last_status() == 500 && e.type.empty())) {
      cursor.iterator.clear();
      ++renewed_;
      return {};
    }
    return answer.take_error();
  }
  auto page = parse_get_records(*answer);
  if (!page) return page.take_error();
  ShardAnswer out;
  out.records = std::move(page->records);
  out.millis_behind = page->millis_behind;
  out.full = out.records.size() >= kGetRecordsLimit;
  out.sent = sent;
  if (page->next_iterator) {
    cursor.iterator = std::move(*page->next_iterator);
  } else {
    // Closed and read to its end: its children (named on its last page,
    // and listed anyway) may be read now.
    out.ended = true;
    out.children = std::move(page->child_shards);
  }
  return got(shard, out);
}

Status PollingFetcher::fetch(const std::vector<std::string>& readable, const ShardLineage& lineage,
                             const StartOf& start_of, const Got& got) {
  Millis now = clock_.steady();
  Millis earliest = std::numeric_limits<Millis>::max();
  bool called = false;
  for (const auto& id : readable) {
    Cursor& cursor = cursors_[id];
    if (cursor.due > now) {
      earliest = std::min(earliest, cursor.due);
      continue;
    }
    // The lineage may change within (a closed shard's children): the
    // shard is looked up afresh, and read from its own copy.
    auto it = lineage.shards().find(id);
    if (it == lineage.shards().end()) continue;
    Shard shard = it->second;
    KPIPE_TRY(fetch_one(shard, cursor, start_of, got));
    called = true;
  }
  // Nothing due: wait for the first that will be, or a call's interval
  // when no shard is left to read.
  if (!called)
    clock_.sleep_for(earliest != std::numeric_limits<Millis>::max() ? earliest - now
                                                                    : kGetRecordsInterval);
  return {};
}

ShardStart StreamReader::start_of(const Shard& shard) const {
  ShardStart start;
  auto last = last_read_.find(shard.id);
  if (last != last_read_.end()) {
    start.kind = ShardStart::Kind::kAfterSequence;
    start.sequence = last->second;
  } else if (starts_) {
    auto plan = starts_(shard);
    if (plan.start) start = std::move(*plan.start);
  }
  return start;
}

Status StreamReader::take(const Shard& shard, ShardAnswer& answer, const Handler& handler) {
  Event event;
  event.shard = &shard;
  if (unannounced_.erase(shard.id) != 0) {
    event.kind = Event::Kind::kAdded;
    KPIPE_TRY(handler(event));
  }
  Progress& progress = progress_[shard.id];
  progress.answered = answer.sent;
  for (const auto& r : answer.records) {
    last_read_[shard.id] = r.sequence;
    event.kind = Event::Kind::kRecord;
    event.record = &r;
    KPIPE_TRY(handler(event));
  }
  event.record = nullptr;
  if (answer.ended) {
    // Closed and read to its end: its children may be read now.
    lineage_.finish(shard.id);
    for (const auto& child : answer.children) lineage_.add(child);
    event.kind = Event::Kind::kClosed;
    return handler(event);
  }
  bool tip = answer.millis_behind == 0 && !answer.full;
  // Said on reaching the tip, and again after records read up to it (as
  // librdkafka says a partition's end after each batch that reaches it):
  // a reader that waits for the tip (kjoin's table) sees it whenever it
  // began waiting.
  if (tip && (!progress.at_tip || !answer.records.empty())) {
    progress.at_tip = true;
    event.kind = Event::Kind::kCaughtUp;
    return handler(event);
  }
  progress.at_tip = tip;
  return {};
}

Status StreamReader::poll(const Handler& handler) {
  std::vector<std::string> ids;
  for (const auto& id : lineage_.readable()) {
    if (paused_.count(id) != 0) continue;
    if (planned_.insert(id).second && starts_) {
      // The first time: a shard not to be read is done at once; one the
      // caller did not know is to be announced.
      const Shard& shard = lineage_.shards().at(id);
      Plan plan = starts_(shard);
      if (!plan.start) {
        lineage_.finish(id);
        continue;
      }
      // Announced with its first answer, right before its records.
      if (plan.added) unannounced_.insert(id);
    }
    ids.push_back(id);
  }
  return fetcher_->fetch(
      ids, lineage_, [this](const Shard& shard) { return start_of(shard); },
      [&](const Shard& shard, ShardAnswer& answer) { return take(shard, answer, handler); });
}

bool StreamReader::caught_up(Millis since) const {
  for (const auto& id : lineage_.readable()) {
    if (paused_.count(id) != 0) continue;
    auto it = progress_.find(id);
    if (it == progress_.end() || !it->second.at_tip || it->second.answered < since) return false;
  }
  return true;
}

}  // namespace kpipe
