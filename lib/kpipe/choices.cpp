#include "kpipe/choices.h"

#include <algorithm>

namespace kpipe {

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_choice(std::string_view word, const std::vector<std::string>& choices) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : choices) {
    size_t d = edit_distance(word, c);
    if (c.starts_with(word) && !word.empty()) d = std::min<size_t>(d, 1);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

Error unknown_choice(std::string_view what, std::string_view word,
                     const std::vector<std::string>& choices) {
  std::string best = closest_choice(word, choices);
  if (!best.empty()) return usage_error("unknown {} '{}', did you mean '{}'?", what, word, best);
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) list += i + 1 == choices.size() ? " or " : ", ";
    list += choices[i];
  }
  return usage_error("unknown {} '{}' (expected {})", what, word, list);
}

Expected<size_t> parse_choice(std::string_view what, std::string_view word,
                              const std::vector<std::string>& choices) {
  for (size_t i = 0; i < choices.size(); ++i)
    if (choices[i] == word) return i;
  return unknown_choice(what, word, choices);
}

}  // namespace kpipe
