#include "kpipe/quote.h"

#include <fmt/format.h>

#include <iterator>

namespace kpipe {

std::string quoted(std::string_view text, const QuoteStyle& style) {
  bool cut = false;
  if (text.size() > style.max_shown) {
    size_t end = style.max_shown;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    text = text.substr(0, end);
    cut = true;
  }
  std::string out;
  out.reserve(text.size() + 5);
  if (style.quotes) out += '\'';
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    bool escape = u < 0x20 || u == 0x7F || (style.ascii_only && u > 0x7F);
    if (!escape) {
      out += c;
    } else if (style.json_escapes) {
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", u);
    } else {
      fmt::format_to(std::back_inserter(out), "\\x{:02x}", u);
    }
  }
  if (cut) out += "...";
  if (style.quotes) out += '\'';
  return out;
}

}  // namespace kpipe
