// Dead letters: what a program sends to the dead-letter store (DeadLetter,
// through a DeadLetterSink), and the entry as kdlq reads it back, from the
// SQLite store or from a Kafka dead-letter topic: the entry, the filters kdlq takes, how entries
// are shown (NDJSON or a table) and counted (stats), and how a dead letter
// is laid out as a Kafka record. Pure: neither SQLite nor librdkafka here,
// so that the formats are tested without a file or a broker.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/envelope.h"
#include "kpipe/partition.h"
#include "kpipe/status.h"
#include "kpipe/text_table.h"
#include "kpipe/time.h"

namespace kpipe {

// A line that a program refuses, on its way to the dead-letter store
// (kpipe(7), BAD INPUT).
struct DeadLetter {
  Millis at = 0;
  std::string stage;   // "kdedup", or "kdedup/NAME" with --name
  std::string reason;  // the exact message, line number included
  std::string input;   // "<stdin>" or a path
  uint64_t line = 0;
  std::optional<SourcePosition> source;  // when the line was an envelope
  std::string_view payload;              // the original line, byte for byte
};

// Where dead letters go: the SQLite store (store/dlq_store.h) or a Kafka
// topic (kafka/dlq.h).
class DeadLetterSink {
 public:
  virtual ~DeadLetterSink() = default;
  virtual Status write(const DeadLetter& letter) = 0;
  // Makes every write so far durable. Called before a checkpoint passes,
  // when idle, and at exit: nothing is acknowledged upstream before its
  // dead letters are safe.
  virtual Status sync() = 0;
  virtual std::string describe() const = 0;
};

// Headers of a Kafka dead-letter record. The first six are the context
// headers of the contract (Kafka Connect's errors.deadletterqueue.context.
// headers, in kpipe's namespace); the rest let kdlq give back the original
// line byte for byte.
namespace dlq_header {
inline constexpr std::string_view kReason = "kpipe.error.reason";
inline constexpr std::string_view kStage = "kpipe.error.stage";
inline constexpr std::string_view kAt = "kpipe.error.at";
inline constexpr std::string_view kSourceTopic = "kpipe.source.topic";
inline constexpr std::string_view kSourcePartition = "kpipe.source.partition";
inline constexpr std::string_view kSourceOffset = "kpipe.source.offset";
inline constexpr std::string_view kInput = "kpipe.error.input";
inline constexpr std::string_view kLine = "kpipe.error.line";
// "line": the value is the original line. "record": the line was an
// envelope, and key, value, headers and timestamp are its record's.
inline constexpr std::string_view kValue = "kpipe.dlq.value";
// With "record", the original envelope line when rebuilding it from the
// record would not give the same bytes (an envelope kconsume did not write).
inline constexpr std::string_view kSourceLine = "kpipe.source.line";
// Set by kdlq replay on every record it produces: which entry it replays,
// so that a replay killed mid-batch can tell what reached the broker.
inline constexpr std::string_view kReplayId = "kpipe.replay.id";
}  // namespace dlq_header

// Whether a header is one kpipe adds to a dead letter (not the record's own).
bool is_context_header(std::string_view name);

// A Kafka record that owns its bytes.
struct OwnedRecord {
  std::optional<std::string> key;
  std::optional<std::string> value;  // nullopt: a tombstone
  std::vector<EnvelopeRecord::OwnedHeader> headers;
  int64_t timestamp = 0;  // epoch ms; 0: none (the producer stamps it)
};

struct DlqEntry {
  int64_t id = 0;  // the store's row id
  // In a Kafka dead-letter topic: where the entry is (the id is unused).
  std::optional<PartitionOffset> position;
  Millis at = 0;
  std::string stage;
  std::string reason;  // with the line number: "line 17: field '.ts' is missing"
  std::string input;
  std::optional<int64_t> line;
  std::optional<SourcePosition> source;
  std::string payload;  // the original line, byte for byte
  bool replayed = false;
  std::optional<Millis> replayed_at;  // the store keeps the time
  std::optional<int64_t> failures;    // the store: times the line failed
  // A Kafka entry that was an envelope: the record to produce back.
  std::optional<OwnedRecord> record;

  // "17", or "0:17" (partition:offset) for a Kafka entry.
  std::string id_text() const;
};

// kdlq's filters. Each is applied the same way to both kinds of store.
struct DlqFilter {
  std::string reason;           // a substring of the reason, case-sensitive
  std::string stage;            // "kdedup" matches "kdedup" and "kdedup/NAME"
  std::string source_topic;     // exact
  std::optional<Millis> since;  // at >= since
  std::optional<Millis> until;  // at < until
  bool pending_only = false;    // not replayed yet

  bool matches(const DlqEntry& e) const;
  // Whether any of reason, stage, source topic or times narrows the set.
  bool narrows() const;
};

// "line 17: field '.ts' is missing" -> "field '.ts' is missing": what
// stats --by reason groups on.
std::string_view reason_cause(std::string_view reason);

// One entry as an NDJSON line ('\n' included): the payload as "payload"
// when it is valid UTF-8, else as "payload_base64".
void append_entry_ndjson(std::string& out, const DlqEntry& e);

// --- dead letters as JSON records (a Kinesis stream's) ---------------------------

// What marks a record's JSON object as a dead letter kpipe wrote.
inline constexpr std::string_view kDeadLetterMark = "kpipe_dead_letter";

// A dead letter as one JSON object, the record a Kinesis dead-letter
// stream holds (which has no headers): kdlq list's NDJSON line without the
// id and the replay state, kDeadLetterMark first, the line byte for byte
// as "payload" or "payload_base64".
std::string dead_letter_json(const DeadLetter& d);
// Such a record read back as an entry (no position set). Any other
// record comes back with an empty stage and reason, its bytes the payload.
DlqEntry parse_dead_letter_json(std::string_view data);

// The table row kdlq list shows for an entry.
TextTable make_entry_table();
void add_entry_row(TextTable& table, const DlqEntry& e);

// At most `max` characters of a line, control characters and bytes that
// are not UTF-8 escaped, "..." when cut: for tables.
std::string preview(std::string_view bytes, size_t max);

// kdlq stats: entries counted by one key.
class DlqStats {
 public:
  enum class By { kReason, kStage, kTopic, kHour };
  static Expected<By> parse_by(std::string_view text);

  explicit DlqStats(By by) : by_(by) {}
  void add(const DlqEntry& e);
  void render_table(std::string& out) const;
  void render_ndjson(std::string& out) const;
  uint64_t total() const { return total_; }

 private:
  struct Group {
    uint64_t count = 0;
    uint64_t pending = 0;
    Millis first = 0;
    Millis last = 0;
    bool null_key = false;  // --by topic: entries without a source topic
  };
  std::vector<std::pair<std::string, const Group*>> sorted() const;
  const char* key_name() const;

  By by_;
  std::map<std::string, Group> groups_;
  uint64_t total_ = 0;
  uint64_t pending_ = 0;
};

// --- Kafka dead-letter records ---------------------------------------------------

// How the Kafka sink writes a dead letter: the original record restored
// from an envelope (key, value, headers, timestamp), else the line as the
// value; then the context headers. `reader` is reused across calls.
OwnedRecord encode_dead_letter(const DeadLetter& d, EnvelopeReader& reader);

// A record read from a Kafka dead-letter topic, as an entry. Records that
// kpipe did not write (no context headers) come back with an empty stage
// and reason, their value as the payload.
DlqEntry decode_dead_letter(const RecordView& r);

// The envelope line kconsume would write for `record` read at `source`:
// how a "record" dead letter gives back its line.
std::string envelope_line(const OwnedRecord& record, const SourcePosition& source);

}  // namespace kpipe
