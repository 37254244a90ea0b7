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
    : client_(client), stream_(std::move(stream)), clock_(clock) {}

Status StreamReader::open(Starts starts) {
  starts_ = std::move(starts);
  std::string token;
  do {
    // A page after the first names only its token (the API refuses both).
    std::string body;
    if (token.empty()) {
      body = stream_field(stream_) + "}";
    } else {
      body = R"({"NextToken":)";
      append_json_string(body, token);
      body += "}";
    }
    auto answer = client_.call("ListShards", body);
    if (!answer) return answer.take_error();
    auto page = parse_list_shards(*answer);
    if (!page) return page.take_error();
    for (const auto& s : page->shards) lineage_.add(s);
    token = page->next_token;
  } while (!token.empty());
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

Status StreamReader::renew(const Shard& shard, Cursor& cursor) {
  ShardStart start;
  auto last = last_read_.find(shard.id);
  if (last != last_read_.end()) {
    start.kind = ShardStart::Kind::kAfterSequence;
    start.sequence = last->second;
  } else if (starts_) {
    auto plan = starts_(shard);
    if (plan.start) start = std::move(*plan.start);
  }
  auto answer = client_.call("GetShardIterator", shard_iterator_body(stream_, shard.id, start));
  if (!answer) return answer.take_error();
  auto iterator = iterator_of(*answer, shard, stream_);
  if (!iterator) return iterator.take_error();
  cursor.iterator = std::move(*iterator);
  return {};
}

Status StreamReader::fetch(const Shard& shard, Cursor& cursor, const Handler& handler) {
  if (cursor.iterator.empty()) KPIPE_TRY(renew(shard, cursor));
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
  cursor.answered = sent;
  Event event;
  event.shard = &shard;
  for (const auto& r : page->records) {
    last_read_[shard.id] = r.sequence;
    event.kind = Event::Kind::kRecord;
    event.record = &r;
    KPIPE_TRY(handler(event));
  }
  event.record = nullptr;
  if (!page->next_iterator) {
    // Closed and read to its end: its children (named on its last page,
    // and listed anyway) may be read now.
    lineage_.finish(shard.id);
    for (const auto& child : page->child_shards) lineage_.add(child);
    event.kind = Event::Kind::kClosed;
    return handler(event);
  }
  cursor.iterator = std::move(*page->next_iterator);
  // At the tip: the service says 0 ms behind, and the page is not full (a
  // full page may have left records behind: kinesalite says 0 of every
  // page).
  bool tip = page->millis_behind == 0 && page->records.size() < kGetRecordsLimit;
  // Said on reaching the tip, and again after records read up to it (as
  // librdkafka says a partition's end after each batch that reaches it):
  // a reader that waits for the tip (kjoin's table) sees it whenever it
  // began waiting.
  if (tip && (!cursor.at_tip || !page->records.empty())) {
    cursor.at_tip = true;
    event.kind = Event::Kind::kCaughtUp;
    return handler(event);
  }
  cursor.at_tip = tip;
  return {};
}

Status StreamReader::poll(const Handler& handler) {
  Millis now = clock_.steady();
  Millis earliest = std::numeric_limits<Millis>::max();
  bool called = false;
  for (const auto& id : lineage_.readable()) {
    if (paused_.count(id) != 0) continue;
    auto [it, fresh] = cursors_.try_emplace(id);
    Cursor& cursor = it->second;
    if (fresh && starts_) {
      // The first time: a shard not to be read is done at once; one the
      // caller did not know is announced.
      const Shard& shard = lineage_.shards().at(id);
      Plan plan = starts_(shard);
      if (!plan.start) {
        lineage_.finish(id);
        continue;
      }
      if (plan.added) {
        Event added;
        added.kind = Event::Kind::kAdded;
        added.shard = &shard;
        KPIPE_TRY(handler(added));
      }
    }
    if (cursor.due > now) {
      earliest = std::min(earliest, cursor.due);
      continue;
    }
    // The lineage may change within (a closed shard's children): the
    // shard is looked up afresh, and read from its own copy.
    Shard shard = lineage_.shards().at(id);
    KPIPE_TRY(fetch(shard, cursor, handler));
    called = true;
  }
  // Nothing due: wait for the first that will be, or a call's interval
  // when no shard is left to read.
  if (!called)
    clock_.sleep_for(earliest != std::numeric_limits<Millis>::max() ? earliest - now
                                                                    : kGetRecordsInterval);
  return {};
}

bool StreamReader::caught_up(Millis since) const {
  for (const auto& id : lineage_.readable()) {
    if (paused_.count(id) != 0) continue;
    auto it = cursors_.find(id);
    if (it == cursors_.end() || !it->second.at_tip || it->second.answered < since) return false;
  }
  return true;
}

}  // namespace kpipe
