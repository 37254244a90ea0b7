// .properties files (kpipe/kafka/config.h, parse_properties: Java syntax,
// comments, continuations, escapes, \uXXXX). Properties: what parses is
// written back, every special character escaped, to a file that parses to
// the same pairs; a secret's value never survives redact_property; the
// Java-name translation never fails on what parses.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_util.h"
#include "kpipe/kafka/config.h"

namespace {

void append_escaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      case '\f':
        out.append("\\f");
        break;
      case '=':
      case ':':
      case ' ':
      case '#':
      case '!':
        out.push_back('\\');
        out.push_back(c);
        break;
      default:
        out.push_back(c);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kpipe::fuzz::ExactInput input(data, size);
  const std::string_view text = input.view();

  auto pairs = kpipe::parse_properties(text, "fuzz.properties");
  if (pairs.ok()) {
    std::string written;
    for (const auto& [key, value] : *pairs) {
      FUZZ_CHECK(!key.empty());
      append_escaped(written, key);
      written.push_back('=');
      append_escaped(written, value);
      written.push_back('\n');
    }
    auto again = kpipe::parse_properties(written, "written.properties");
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(*again == *pairs);

    for (const auto& [key, value] : *pairs) {
      if (!kpipe::is_secret_property(key)) continue;
      if (key.find_first_of("=: \t") != std::string::npos) continue;
      const std::string redacted = kpipe::redact_property(key + "=" + value);
      FUZZ_CHECK(redacted == key + "=***");
    }

    kpipe::KafkaConfig config;
    config.properties = *pairs;
    (void)kpipe::translate_java_properties(config);
  }

  // Any text given to -X, redacted, keeps no more than its key when the key
  // names a secret.
  const std::string redacted = kpipe::redact_property(text);
  FUZZ_CHECK(redacted.size() <= text.size() + 3);
  return 0;
}
