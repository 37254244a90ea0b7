#include "kpipe/stage/bad_input.h"

#include "kpipe/choices.h"
#include "kpipe/envelope.h"

namespace kpipe {

Expected<OnError> parse_on_error(std::string_view text) {
  auto i = parse_choice("--on-error mode", text, {"fail", "dlq", "skip"});
  if (!i) return i.take_error();
  return static_cast<OnError>(*i);
}

BadInputHandler::BadInputHandler(OnError mode, std::unique_ptr<DeadLetterSink> sink,
                                 std::string stage, Clock& clock)
    : mode_(mode), sink_(std::move(sink)), stage_(std::move(stage)), clock_(clock) {
  last_sync_ = clock_.steady();
}

Status BadInputHandler::handle(const std::string& input, const Line& line,
                               std::string_view reason) {
  switch (mode_) {
    case OnError::kFail:
      failed_ = true;
      return data_error("{}: line {}: {}", input, line.number, reason);
    case OnError::kSkip:
      ++skipped_;
      return {};
    case OnError::kDlq:
      return dead_letter(input, line, reason);
  }
  return {};
}

Status BadInputHandler::dead_letter(const std::string& input, const Line& line,
                                    std::string_view reason) {
  return write_letter(input, line, fmt::format("line {}: {}", line.number, reason));
}

Status BadInputHandler::handle_record(std::string_view where, const Line& envelope,
                                      std::string_view reason) {
  switch (mode_) {
    case OnError::kFail:
      failed_ = true;
      return data_error("{}: {}", where, reason);
    case OnError::kSkip:
      ++skipped_;
      return {};
    case OnError::kDlq:
      return write_letter(std::string(where), envelope, fmt::format("{}: {}", where, reason));
  }
  return {};
}

Status BadInputHandler::write_letter(const std::string& input, const Line& line,
                                     std::string reason) {
  if (sink_ == nullptr) return failure("no dead-letter store: give --dlq");
  DeadLetter d;
  d.at = clock_.now();
  d.stage = stage_;
  d.reason = std::move(reason);
  d.input = input;
  d.line = line.number;
  d.source = source_position(line.text);
  d.payload = line.text;
  KPIPE_TRY(sink_->write(d));
  ++dead_lettered_;
  if (unsynced_++ == 0) last_sync_ = clock_.steady();
  // Batched, but bounded: a crash loses at most a moment of dead letters,
  // and a checkpoint never passes before they are durable (sync()).
  if (unsynced_ >= kSyncEvery) return sync();
  return tick();
}

Status BadInputHandler::tick() {
  if (unsynced_ == 0 || clock_.steady() - last_sync_ < kSyncInterval) return {};
  return sync();
}

Status BadInputHandler::sync() {
  last_sync_ = clock_.steady();
  if (sink_ == nullptr || unsynced_ == 0) return {};
  unsynced_ = 0;
  return sink_->sync();
}

std::string BadInputHandler::summary(std::string_view noun) const {
  if (skipped_ > 0)
    return fmt::format("skipped {} bad {}{}", skipped_, noun, skipped_ == 1 ? "" : "s");
  if (dead_lettered_ > 0 && sink_ != nullptr)
    return fmt::format("sent {} {}{} to the dead-letter store {}", dead_lettered_, noun,
                       dead_lettered_ == 1 ? "" : "s", sink_->describe());
  return {};
}

}  // namespace kpipe
