// A record's position in its partition (kpipe(7), LOGS): where a partition
// resumes. A Kafka offset is a 64-bit integer, the next record's. A Kinesis
// position is a sequence number, a decimal of up to 129 digits that no
// integer type holds (nor a double: jq would round it), read on after; or,
// before a shard has given a record, an arrival time to read from (a
// shard started at a time, or at its newest record, which is the time it
// was started). Programs never compute one position from another (the log
// says where a partition resumes); they keep them, compare two of one
// partition, and write them: an offset as a JSON number, a sequence number
// as a JSON string of its digits, a time as "@" and its epoch milliseconds.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace kpipe {

struct JsonField;
struct JsonValue;

class Position {
 public:
  enum class Kind : uint8_t { kOffset, kSequence, kTime };

  Position() = default;
  // A Kafka offset (or one of LogStart's): implicit, as Kafka's offsets
  // are int64_t everywhere else.
  constexpr Position(int64_t offset) : offset_(offset) {}  // NOLINT(google-explicit-constructor)

  // A sequence number's digits (no sign, no leading zero, at most 129);
  // nullopt for anything else.
  static std::optional<Position> sequence(std::string_view digits);
  // The first record that arrived at or after `time` (epoch ms).
  static Position arrived_at(int64_t time);
  // From what a JSON string of append_json() holds: a sequence number's
  // digits, or "@" and a time.
  static std::optional<Position> from_string(std::string_view text);
  // From a JSON field: an integer (an offset) or a string as
  // append_json() writes one; nullopt for anything else.
  static std::optional<Position> from_json(const JsonField& field);
  static std::optional<Position> from_json(const JsonValue& value);
  // From text as text() writes it. An int64_t is an offset, a longer
  // number a sequence number (real ones have 56 digits): for text that
  // carries no kind (a Kafka header's, a store's text column).
  static std::optional<Position> from_text(std::string_view text);

  Kind kind() const { return kind_; }
  bool is_offset() const { return kind_ == Kind::kOffset; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_time() const { return kind_ == Kind::kTime; }
  // The Kafka offset; the time for kTime; 0 for a sequence number.
  int64_t offset() const { return offset_; }
  int64_t time() const { return offset_; }
  // The sequence number's digits; empty otherwise.
  const std::string& digits() const { return digits_; }
  // "17", "-2", "4959...", "@1764412345123".
  std::string text() const;
  // An offset as a JSON number, anything else as a JSON string of text().
  void append_json(std::string& out) const;

  friend bool operator==(const Position&, const Position&) = default;
  // By value within a kind. Kinds never meet in one partition but for the
  // offsets programs use as marks (a negative one, none yet, comes before
  // everything; kMax, no end, after everything) and a time a shard started
  // at, before every sequence number read from it.
  friend std::strong_ordering operator<=>(const Position& a, const Position& b);

  static constexpr int64_t kMax = INT64_MAX;

 private:
  int64_t offset_ = 0;
  std::string digits_;
  Kind kind_ = Kind::kOffset;
};

}  // namespace kpipe

// Formats as text().
template <>
struct fmt::formatter<kpipe::Position> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(const kpipe::Position& p, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(p.text(), ctx);
  }
};
