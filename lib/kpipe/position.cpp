#include "kpipe/position.h"

#include <charconv>

#include "kpipe/json.h"

namespace kpipe {
namespace {

// Kinesis's SequenceNumber: "0|([1-9]\d{0,128})".
constexpr size_t kMaxSequenceDigits = 129;

bool all_digits(std::string_view s) {
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return !s.empty();
}

std::optional<int64_t> whole_int(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

int rank(const Position& p) {
  if (p.is_offset()) return p.offset() < 0 ? 0 : (p.offset() == Position::kMax ? 4 : 1);
  return p.is_time() ? 2 : 3;
}

}  // namespace

std::optional<Position> Position::sequence(std::string_view digits) {
  if (!all_digits(digits) || digits.size() > kMaxSequenceDigits) return std::nullopt;
  if (digits.size() > 1 && digits.front() == '0') return std::nullopt;
  Position p;
  p.digits_ = std::string(digits);
  p.kind_ = Kind::kSequence;
  return p;
}

Position Position::arrived_at(int64_t time) {
  Position p(time);
  p.kind_ = Kind::kTime;
  return p;
}

// A sequence number's digits, or "@" and a time.
std::optional<Position> Position::from_string(std::string_view s) {
  if (s.starts_with('@')) {
    auto t = whole_int(s.substr(1));
    if (!t || s.size() < 2 || s[1] == '-' || s[1] == '+') return std::nullopt;
    return Position::arrived_at(*t);
  }
  return Position::sequence(s);
}

std::optional<Position> Position::from_json(const JsonField& field) {
  if (field.type == JsonType::kNumber && field.is_integer) return Position(field.integer);
  if (field.type == JsonType::kString) return from_string(field.str);
  return std::nullopt;
}

std::optional<Position> Position::from_json(const JsonValue& value) {
  if (value.type == JsonType::kNumber && value.is_integer) return Position(value.integer);
  if (value.type == JsonType::kString) return from_string(value.str);
  return std::nullopt;
}

std::optional<Position> Position::from_text(std::string_view text) {
  if (auto offset = whole_int(text)) return Position(*offset);
  return from_string(text);
}

std::string Position::text() const {
  switch (kind_) {
    case Kind::kOffset:
      return std::to_string(offset_);
    case Kind::kSequence:
      return digits_;
    case Kind::kTime:
      return fmt::format("@{}", offset_);
  }
  return {};
}

void Position::append_json(std::string& out) const {
  if (kind_ == Kind::kOffset) {
    append_int(out, offset_);
    return;
  }
  out.push_back('"');
  if (kind_ == Kind::kSequence) {
    out += digits_;
  } else {
    out.push_back('@');
    append_int(out, offset_);
  }
  out.push_back('"');
}

std::strong_ordering operator<=>(const Position& a, const Position& b) {
  if (a.kind_ != b.kind_) {
    // Offsets between 0 and kMax never meet another kind: ranked as if.
    return rank(a) <=> rank(b);
  }
  if (a.kind_ != Position::Kind::kSequence) return a.offset_ <=> b.offset_;
  if (a.digits_.size() != b.digits_.size()) return a.digits_.size() <=> b.digits_.size();
  int c = a.digits_.compare(b.digits_);
  return c < 0 ? std::strong_ordering::less
               : (c > 0 ? std::strong_ordering::greater : std::strong_ordering::equal);
}

}  // namespace kpipe
