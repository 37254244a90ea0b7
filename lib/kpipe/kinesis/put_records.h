// Writing to a Kinesis stream (kproduce -t kinesis:NAME, issue 37):
// records batched into PutRecords calls within the service's limits,
// and the records a call failed sent again, in the order they were
// given, until they are written or the time is out. A record the service
// can never take (too large, no partition key) is bad input at once,
// never a batch's failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/kinesis/kinesis_client.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// PutRecords' limits (the Kinesis API reference): 500 records and 5 MiB
// per call, 1 MiB per record (its data and its partition key), a
// partition key of 1 to 256 characters.
constexpr size_t kPutRecordsMaxRecords = 500;
constexpr size_t kPutRecordsMaxBytes = 5 * 1024 * 1024;
constexpr size_t kPutRecordMaxBytes = 1024 * 1024;
constexpr size_t kPartitionKeyMaxChars = 256;

struct PutEntry {
  std::string partition_key;
  std::string data;
  std::string explicit_hash_key;  // "" when none
  uint64_t tag = 0;               // the caller's, given back with its fate
};

// Why the service could never take the entry; ok when it may.
Status check_put_entry(const PutEntry& entry);

// The PutRecords request body for `entries`.
std::string put_records_body(std::string_view stream, const std::vector<PutEntry>& entries);

// What PutRecords said of each entry, in order.
struct PutOutcome {
  bool written = false;
  std::string shard_id;
  std::string sequence;
  std::string error_code;  // when not written
  std::string error_message;
};
Expected<std::vector<PutOutcome>> parse_put_records(std::string_view json, size_t entries);

class KinesisWriter {
 public:
  // err null: written; otherwise why it never will be.
  using DeliveryHandler = std::function<void(uint64_t tag, const Error* err)>;

  KinesisWriter(KinesisClient& client, std::string stream, Clock& clock, Millis timeout);

  void set_delivery_handler(DeliveryHandler handler) { on_delivery_ = std::move(handler); }
  // Queues one entry, sending a batch when the next would not fit. A
  // data_error for an entry the service could never take.
  Status write(PutEntry entry);
  // Sends what is queued, until each entry is written or failed for good.
  Status flush();

  uint64_t delivered() const { return delivered_; }
  uint64_t resent() const { return resent_; }

 private:
  Status send(std::vector<PutEntry> batch);

  KinesisClient& client_;
  std::string stream_;
  Clock& clock_;
  Millis timeout_;
  DeliveryHandler on_delivery_;
  std::vector<PutEntry> queue_;
  size_t queued_bytes_ = 0;
  uint64_t delivered_ = 0;
  uint64_t resent_ = 0;
};

}  // namespace kpipe
