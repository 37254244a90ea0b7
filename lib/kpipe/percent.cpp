#include "kpipe/percent.h"

namespace kpipe {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool percent_decode(std::string_view text, std::string& out) {
  out.clear();
  bool whole = true;
  for (size_t i = 0; i < text.size(); ++i) {
    int hi = text[i] == '%' && i + 1 < text.size() ? hex_value(text[i + 1]) : -1;
    int lo = hi >= 0 && i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
    if (lo < 0) {
      whole = whole && text[i] != '%';
      out.push_back(text[i]);
      continue;
    }
    out.push_back(static_cast<char>(hi << 4 | lo));
    i += 2;
  }
  return whole;
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    bool unreserved = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') ||
                      u == '-' || u == '.' || u == '_' || u == '~';
    if (unreserved) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

}  // namespace kpipe
