#include "kpipe/kafka/topic.h"

#include <string>

namespace kpipe {

namespace {

bool is_topic_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// The name as a message may quote it: printable ASCII as is, other bytes
// escaped, so that a diagnostic stays one line.
std::string quotable(std::string_view name) {
  std::string out;
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  return out;
}

}  // namespace

Status check_topic_name(std::string_view name) {
  if (name.empty()) return usage_error("the topic name is empty");
  if (name == "." || name == "..") return usage_error("'{}' is not a valid topic name", name);
  if (name.size() > kMaxTopicNameLength)
    return usage_error("topic name '{}...' is {} characters long; Kafka takes at most {}",
                       quotable(name.substr(0, 20)), name.size(), kMaxTopicNameLength);
  for (char c : name) {
    if (is_topic_char(c)) continue;
    return usage_error(
        "invalid topic name '{}': only ASCII letters, digits, '.', '_' and '-' are allowed",
        quotable(name));
  }
  return {};
}

}  // namespace kpipe
