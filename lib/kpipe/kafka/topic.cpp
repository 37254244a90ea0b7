#include "kpipe/kafka/topic.h"

#include "kpipe/quote.h"

#include <string>

namespace kpipe {

namespace {

bool is_topic_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

Status check_topic_name(std::string_view name) {
  if (name.empty()) return usage_error("the topic name is empty");
  if (name == "." || name == "..") return usage_error("'{}' is not a valid topic name", name);
  if (name.size() > kMaxTopicNameLength)
    return usage_error("topic name '{}...' is {} characters long; Kafka takes at most {}",
                       quoted(name.substr(0, 20), kNameQuote), name.size(), kMaxTopicNameLength);
  for (char c : name) {
    if (is_topic_char(c)) continue;
    return usage_error(
        "invalid topic name '{}': only ASCII letters, digits, '.', '_' and '-' are allowed",
        quoted(name, kNameQuote));
  }
  return {};
}

}  // namespace kpipe
