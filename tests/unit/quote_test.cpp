#include "kpipe/quote.h"

#include <catch2/catch.hpp>
#include <string>

using kpipe::kJsonWordQuote;
using kpipe::kNameQuote;
using kpipe::quoted;

TEST_CASE("quoted: a value in single quotes, control characters escaped", "[quote]") {
  CHECK(quoted("12:00") == "'12:00'");
  CHECK(quoted("a\nb\x1b[2J") == "'a\\x0ab\\x1b[2J'");
  CHECK(quoted("del\x7f") == "'del\\x7f'");
  CHECK(quoted("") == "''");
}

TEST_CASE("quoted: a long value is cut, never inside a UTF-8 sequence", "[quote]") {
  std::string long_text(100, 'x');
  CHECK(quoted(long_text) == "'" + std::string(64, 'x') + "...'");
  // 63 bytes, then a 2-byte letter across the 64th: it goes whole.
  std::string text = std::string(63, 'x') + "\xc3\xa9" + "tail";
  CHECK(quoted(text) == "'" + std::string(63, 'x') + "...'");
  CHECK(quoted(std::string(64, 'x')) == "'" + std::string(64, 'x') + "'");
}

TEST_CASE("quoted: a word of a JSON line, with JSON's escapes", "[quote]") {
  CHECK(quoted("tru\x01", kJsonWordQuote) == "'tru\\u0001'");
  CHECK(quoted(std::string(40, 'n'), kJsonWordQuote) == "'" + std::string(32, 'n') + "...'");
}

TEST_CASE("quoted: a name whole, bytes past ASCII escaped, no quotes", "[quote]") {
  std::string name = std::string(300, 't') + "\xc3\xa9";
  CHECK(quoted(name, kNameQuote) == std::string(300, 't') + "\\xc3\\xa9");
  CHECK(quoted("caf\xc3\xa9\t", kNameQuote) == "caf\\xc3\\xa9\\x09");
}
