// Field paths (kpipe(7), FIELD PATHS; kpipe/json.h): a path that parses is
// written back (append_path_key and [N] for the dot form, "/" and ~0 ~1 for
// a JSON Pointer) to a text that parses to the same steps; a pointer token
// read as an index is the index's canonical digits (RFC 6901); guard's
// --require PATH:TYPE parses what FieldPath parses.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "kpipe/guard.h"
#include "kpipe/json.h"

namespace {

bool same_steps(const kpipe::FieldPath& a, const kpipe::FieldPath& b) {
  if (a.steps().size() != b.steps().size()) return false;
  for (size_t i = 0; i < a.steps().size(); ++i) {
    const auto& x = a.steps()[i];
    const auto& y = b.steps()[i];
    if (x.has_key != y.has_key || x.has_index != y.has_index) return false;
    if (x.has_key && x.key != y.key) return false;
    if (x.has_index && x.index != y.index) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kpipe::fuzz::ExactInput input(data, size);
  const std::string_view text = input.view();
  auto path = kpipe::FieldPath::parse(text);
  if (!path) return 0;
  FUZZ_CHECK(path->text() == text);

  bool pointer = false;
  for (const auto& step : path->steps()) {
    FUZZ_CHECK(step.has_key || step.has_index);
    if (step.has_key && step.has_index) {
      pointer = true;
      // "/0" may be key "0" or index 0: never "/01" as index 1, nor an
      // index that overflowed.
      FUZZ_CHECK(std::to_string(step.index) == step.key);
    }
  }

  std::string written;
  if (!text.empty() && text[0] == '/') {
    for (const auto& step : path->steps()) {
      FUZZ_CHECK(step.has_key);
      written.push_back('/');
      for (char c : step.key) {
        if (c == '~')
          written.append("~0");
        else if (c == '/')
          written.append("~1");
        else
          written.push_back(c);
      }
    }
  } else {
    FUZZ_CHECK(!pointer);
    for (const auto& step : path->steps()) {
      if (step.has_key)
        kpipe::append_path_key(written, step.key);
      else
        written.append("[" + std::to_string(step.index) + "]");
    }
    if (written.empty()) written = ".";
  }
  auto again = kpipe::FieldPath::parse(written);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(same_steps(*path, *again));
  if (!path->steps().empty() && path->steps().back().has_key)
    FUZZ_CHECK(path->last_key() == path->steps().back().key);

  // --require takes any path of a field that holds no ':' as it is.
  if (text.find(':') == std::string_view::npos && !path->steps().empty()) {
    auto req = kpipe::parse_requirement(text);
    FUZZ_CHECK(req.ok());
    FUZZ_CHECK(req->type == kpipe::FieldType::kAny);
    FUZZ_CHECK(same_steps(req->path, *path));
  }
  return 0;
}
