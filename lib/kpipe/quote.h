// How a diagnostic shows a value it is about (kpipe(7), DIAGNOSTICS: one
// line each). Values come from records and command lines, so they are cut
// short and their control characters escaped: a message must stay one
// line, and a terminal must not take a record's bytes as commands.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

namespace kpipe {

struct QuoteStyle {
  // Bytes shown before "..." (a cut never splits a UTF-8 sequence).
  size_t max_shown = 64;
  // Control characters as JSON writes them (\u001b), not as \x1b: for a
  // word of a JSON line.
  bool json_escapes = false;
  // Bytes past ASCII escaped too: for a name whose rules allow ASCII only.
  bool ascii_only = false;
  // In single quotes; without, the caller's message quotes it.
  bool quotes = true;
};

// A value shown in a message: a record's field, a time, an option's value.
inline constexpr QuoteStyle kValueQuote{};
// A word of a JSON line, where the line failed to parse.
inline constexpr QuoteStyle kJsonWordQuote{.max_shown = 32, .json_escapes = true};
// A name given to a system whose names are printable ASCII (a Kafka topic),
// whole, inside the message's own quotes.
inline constexpr QuoteStyle kNameQuote{
    .max_shown = std::numeric_limits<size_t>::max(), .ascii_only = true, .quotes = false};

std::string quoted(std::string_view text, const QuoteStyle& style = kValueQuote);

}  // namespace kpipe
