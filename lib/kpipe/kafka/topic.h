// What Kafka accepts as a topic name, checked before any broker is asked:
// a broker would refuse a bad name only after a connection, and kbroker's
// mock cluster would create it.
#pragma once

#include <cstddef>
#include <string_view>

#include "kpipe/status.h"

namespace kpipe {

// Kafka's limit (Topic.MAX_NAME_LENGTH): longer names do not fit its
// partition directories' names.
constexpr size_t kMaxTopicNameLength = 249;

// ok, or a usage_error saying what is wrong with `name`: Kafka takes ASCII
// letters, digits, '.', '_' and '-', at most kMaxTopicNameLength of them,
// and neither "." nor "..".
Status check_topic_name(std::string_view name);

}  // namespace kpipe
