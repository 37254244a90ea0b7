#include "kpipe/percent.h"

#include <catch2/catch.hpp>

using kpipe::percent_decode;
using kpipe::percent_encode;

TEST_CASE("percent_decode: escapes decoded in either case, the rest as written", "[percent]") {
  std::string out;
  CHECK(percent_decode("p%40ss%2fw%2Fd", out));
  CHECK(out == "p@ss/w/d");
  CHECK(percent_decode("plain", out));
  CHECK(out == "plain");
  CHECK(percent_decode("", out));
  CHECK(out.empty());
}

TEST_CASE("percent_decode: a '%' that starts no escape is kept and makes it false", "[percent]") {
  std::string out;
  // The password of issue 33's first finding: libpq refuses it, and the
  // redaction still has to find it as written.
  CHECK_FALSE(percent_decode("PW_A%zz", out));
  CHECK(out == "PW_A%zz");
  CHECK_FALSE(percent_decode("a%4", out));
  CHECK(out == "a%4");
  CHECK_FALSE(percent_decode("%", out));
  CHECK(out == "%");
  CHECK_FALSE(percent_decode("%41%", out));
  CHECK(out == "A%");
}

TEST_CASE("percent_encode: all but RFC 3986's unreserved bytes, and back", "[percent]") {
  CHECK(percent_encode("AZaz09-._~") == "AZaz09-._~");
  CHECK(percent_encode("arn:aws:iam::1:role/r") == "arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fr");
  CHECK(percent_encode("a b+c=d&\xC3\xA9") == "a%20b%2Bc%3Dd%26%C3%A9");
  std::string out;
  CHECK(percent_decode(percent_encode("x/y?z#\x01"), out));
  CHECK(out == "x/y?z#\x01");
}

TEST_CASE("percent_encode: a registry subject, one path segment, may hold any byte",
          "[percent][registry]") {
  CHECK(percent_encode("orders-value") == "orders-value");
  CHECK(percent_encode("money.proto") == "money.proto");
  CHECK(percent_encode("a/b c") == "a%2Fb%20c");
  CHECK(percent_encode("100%?#") == "100%25%3F%23");
  CHECK(percent_encode("caf\xc3\xa9") == "caf%C3%A9");
  CHECK(percent_encode("") == "");
}
