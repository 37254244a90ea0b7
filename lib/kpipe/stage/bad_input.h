// Bad input never vanishes (kpipe(7), BAD INPUT): --on-error fail stops
// with the line's number and the reason, dlq keeps the line in a
// dead-letter store, skip counts it. One component applies it for every
// program; the store it writes to is opened by the caller
// (programs/dlq_targets.h), so that this layer needs neither Kafka nor
// SQLite.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kpipe/dlq_entry.h"
#include "kpipe/stage/io.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

enum class OnError { kFail, kDlq, kSkip };
Expected<OnError> parse_on_error(std::string_view text);

// Applies --on-error to one bad line.
class BadInputHandler {
 public:
  // `sink` is required for kDlq and may be null otherwise.
  BadInputHandler(OnError mode, std::unique_ptr<DeadLetterSink> sink, std::string stage,
                  Clock& clock);

  // ok: go on. A data_error "INPUT: line N: REASON" under --on-error fail.
  Status handle(const std::string& input, const Line& line, std::string_view reason);
  // Sends a line to the store whatever --on-error says (late records with
  // --late dlq, duplicates with --dups dlq).
  Status dead_letter(const std::string& input, const Line& line, std::string_view reason);
  // The same for a Kafka record that kconsume cannot decode (kpipe(7),
  // SCHEMA REGISTRY): `where` names it ("orders[3]@1234"), `envelope` is
  // its envelope with the payloads as raw bytes (padded, as a Line's
  // text), kept byte for byte so that a replay sends them back unchanged.
  Status handle_record(std::string_view where, const Line& envelope, std::string_view reason);
  Status sync();
  // Syncs when the oldest unsynced dead letter is older than
  // kSyncInterval. Called after every record, so that a stream of good
  // lines never keeps an earlier dead letter waiting.
  Status tick();

  // At most this many dead letters, or this long, between syncs.
  static constexpr uint64_t kSyncEvery = 1000;
  static constexpr Millis kSyncInterval = 200;

  // Whether handle() has refused a line under --on-error fail: the run is
  // over, and the error it returned already names its line (a stage that
  // holds lines, like kupsert, reports one while reading another).
  bool failed() const { return failed_; }
  uint64_t skipped() const { return skipped_; }
  uint64_t dead_lettered() const { return dead_lettered_; }
  OnError mode() const { return mode_; }
  bool has_sink() const { return sink_ != nullptr; }
  // "skipped 3 bad lines" / "sent 3 lines to the dead-letter store FILE",
  // or empty; kconsume's bad input is records, not lines.
  std::string summary(std::string_view noun = "line") const;

 private:
  Status write_letter(const std::string& input, const Line& line, std::string reason);

  OnError mode_;
  std::unique_ptr<DeadLetterSink> sink_;
  std::string stage_;
  Clock& clock_;
  bool failed_ = false;
  uint64_t skipped_ = 0;
  uint64_t dead_lettered_ = 0;
  uint64_t unsynced_ = 0;
  Millis last_sync_ = 0;  // when the oldest unsynced dead letter was written
};

}  // namespace kpipe
