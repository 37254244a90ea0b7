// Parsing a word from a fixed set, with a suggestion when it is mistyped
// (ninja: "unknown tool 'clen', did you mean 'clean'?").
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/status.h"

namespace kpipe {

// The closest choice within a small edit distance, or empty.
std::string closest_choice(std::string_view word, const std::vector<std::string>& choices);

// "unknown WHAT 'tumblin', did you mean 'tumble'?" or "... (expected a, b or c)".
Error unknown_choice(std::string_view what, std::string_view word,
                     const std::vector<std::string>& choices);

// The index of `word` in `choices`, or a usage_error from unknown_choice.
Expected<size_t> parse_choice(std::string_view what, std::string_view word,
                              const std::vector<std::string>& choices);

}  // namespace kpipe
