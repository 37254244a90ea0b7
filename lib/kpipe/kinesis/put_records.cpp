#include "kpipe/kinesis/put_records.h"

#include <simdjson.h>

#include <algorithm>

#include "kpipe/json.h"
#include "kpipe/kinesis/kinesis_log.h"

namespace kpipe {

namespace {

size_t utf8_chars(std::string_view s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

size_t entry_bytes(const PutEntry& e) {
  return e.data.size() + e.partition_key.size();
}

// The per-record failures worth sending again: the shard's throughput,
// and the service's own.
bool resend(const std::string& code) {
  return code == "ProvisionedThroughputExceededException" || code == "InternalFailure";
}

constexpr Millis kResendBase = 100;
constexpr Millis kResendCap = 5 * kSecond;

}  // namespace

Status check_put_entry(const PutEntry& entry) {
  if (entry.partition_key.empty())
    return data_error("a Kinesis record needs a partition key, and this one has none");
  size_t chars = utf8_chars(entry.partition_key);
  if (chars > kPartitionKeyMaxChars)
    return data_error("the partition key has {} characters, over Kinesis's {}", chars,
                      kPartitionKeyMaxChars);
  if (!entry.explicit_hash_key.empty()) {
    auto hash = parse_explicit_hash_key(entry.explicit_hash_key);
    if (!hash) return data_error("the explicit hash key {}", hash.error().message);
    if (*hash != entry.explicit_hash_key)
      return data_error("the explicit hash key '{}' has leading zeros", entry.explicit_hash_key);
  }
  if (entry_bytes(entry) > kPutRecordMaxBytes)
    return data_error("the record has {} bytes (data and partition key), over Kinesis's {} (1 MiB)",
                      entry_bytes(entry), kPutRecordMaxBytes);
  return {};
}

std::string put_records_body(std::string_view stream, const std::vector<PutEntry>& entries) {
  std::string out = R"({"StreamName":)";
  append_json_string(out, stream);
  out += R"(,"Records":[)";
  for (size_t i = 0; i < entries.size(); ++i) {
    const PutEntry& e = entries[i];
    if (i > 0) out.push_back(',');
    out += R"({"Data":")";
    append_base64(out, e.data);
    out += R"(","PartitionKey":)";
    append_json_string(out, e.partition_key);
    if (!e.explicit_hash_key.empty()) {
      out += R"(,"ExplicitHashKey":)";
      append_json_string(out, e.explicit_hash_key);
    }
    out.push_back('}');
  }
  out += "]}";
  return out;
}

Expected<std::vector<PutOutcome>> parse_put_records(std::string_view json, size_t entries) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS)
    return failure("kinesis PutRecords: the answer is not JSON");
  simdjson::dom::array records;
  if (doc["Records"].get(records) != simdjson::SUCCESS)
    return failure("kinesis PutRecords: the answer has no Records");
  std::vector<PutOutcome> out;
  for (simdjson::dom::element r : records) {
    PutOutcome o;
    auto text = [&](const char* key) {
      std::string_view v;
      return r[key].get(v) == simdjson::SUCCESS ? std::string(v) : std::string();
    };
    o.error_code = text("ErrorCode");
    o.error_message = text("ErrorMessage");
    o.sequence = text("SequenceNumber");
    o.shard_id = text("ShardId");
    o.written = o.error_code.empty() && !o.sequence.empty();
    out.push_back(std::move(o));
  }
  // One answer per record sent, in order: anything else would pair a
  // record with another's fate.
  if (out.size() != entries)
    return failure("kinesis PutRecords: {} answers for {} records", out.size(), entries);
  return out;
}

KinesisWriter::KinesisWriter(KinesisClient& client, std::string stream, Clock& clock,
                             Millis timeout)
    : client_(client), stream_(std::move(stream)), clock_(clock), timeout_(timeout) {}

Status KinesisWriter::write(PutEntry entry) {
  KPIPE_TRY(check_put_entry(entry));
  size_t bytes = entry_bytes(entry);
  if (queue_.size() == kPutRecordsMaxRecords || queued_bytes_ + bytes > kPutRecordsMaxBytes)
    KPIPE_TRY(flush());
  queued_bytes_ += bytes;
  queue_.push_back(std::move(entry));
  return {};
}

Status KinesisWriter::flush() {
  if (queue_.empty()) return {};
  std::vector<PutEntry> batch;
  batch.swap(queue_);
  queued_bytes_ = 0;
  return send(std::move(batch));
}

Status KinesisWriter::send(std::vector<PutEntry> batch) {
  Millis deadline = clock_.steady() + timeout_;
  for (int attempt = 0;; ++attempt) {
    auto answer = client_.call("PutRecords", put_records_body(stream_, batch));
    Expected<std::vector<PutOutcome>> outcomes =
        answer ? parse_put_records(*answer, batch.size())
               : Expected<std::vector<PutOutcome>>(answer.take_error());
    if (!outcomes) {
      // Not one record's fate is known: each is said to have failed, and
      // the caller says how many (a record not acknowledged may have been
      // written, as with Kafka).
      Error e = outcomes.error();
      for (const auto& entry : batch)
        if (on_delivery_) on_delivery_(entry.tag, &e);
      return e;
    }
    std::vector<PutEntry> again;
    std::string last_code, last_message;
    for (size_t i = 0; i < batch.size(); ++i) {
      const PutOutcome& o = (*outcomes)[i];
      if (o.written) {
        ++delivered_;
        if (on_delivery_) on_delivery_(batch[i].tag, nullptr);
      } else if (resend(o.error_code)) {
        last_code = o.error_code;
        last_message = o.error_message;
        again.push_back(std::move(batch[i]));
      } else {
        Error e = data_error("kinesis refused the record: {}{}", o.error_code,
                             o.error_message.empty() ? "" : ": " + o.error_message);
        if (on_delivery_) on_delivery_(batch[i].tag, &e);
      }
    }
    if (again.empty()) return {};
    Millis step = std::min<Millis>(kResendCap, kResendBase << std::min(attempt, 10));
    if (clock_.steady() + step >= deadline) {
      Error e = failure("kinesis PutRecords: {} records not written within {}: {}{}", again.size(),
                        format_duration(timeout_), last_code,
                        last_message.empty() ? "" : ": " + last_message);
      for (const auto& entry : again)
        if (on_delivery_) on_delivery_(entry.tag, &e);
      return e;
    }
    // The failed ones again, in the order they were given: a partition
    // key's records that failed together stay in their order.
    resent_ += again.size();
    clock_.sleep_for(step);
    batch = std::move(again);
  }
}

}  // namespace kpipe
