#include "kpipe/text_table.h"

#include <algorithm>

namespace kpipe {

namespace {

bool numeric(const std::string& s) {
  if (s == "-" || s.empty()) return true;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  return std::all_of(s.begin() + static_cast<long>(i), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

// Display width: UTF-8 continuation bytes take no column.
size_t width(const std::string& s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

}  // namespace

std::string TextTable::render() const {
  size_t n = header_.size();
  std::vector<size_t> widths(n, 0);
  std::vector<bool> right(n, true);
  for (size_t c = 0; c < n; ++c) {
    widths[c] = width(header_[c]);
    bool any = false;
    for (const auto& row : rows_) {
      if (c >= row.size()) continue;
      widths[c] = std::max(widths[c], width(row[c]));
      if (!numeric(row[c])) right[c] = false;
      any = true;
    }
    if (!any) right[c] = false;
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < n; ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      size_t pad = widths[c] - width(cell);
      if (c > 0) line += "  ";
      if (right[c]) line.append(pad, ' ');
      line += cell;
      if (!right[c] && c + 1 < n) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
  return out;
}

}  // namespace kpipe
