// The NDJSON line reader (kpipe/stage/line_feed.h, kpipe/line.h): two
// inputs read through LineFeed, with a field read on every record.
// Properties: the lines are the inputs' bytes cut at '\n' (a '\r' before
// it dropped, a last line without '\n' kept), in order, numbered from 1
// per input and named by it; too_long says exactly whether a line is
// longer than max_line_bytes; kJsonPadding bytes after every line are
// readable (ASan checks); a line is parsed exactly when it is a record
// (not blank, not a control line, not too long), and its parse agrees with
// JsonReader's on a copy of the line alone.
//
// Input: max_line_bytes (first byte), where the first input ends (second
// byte, as a fraction of the rest), then the bytes.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "kpipe/json.h"
#include "kpipe/line.h"
#include "kpipe/stage/line_feed.h"

namespace {

std::vector<std::string_view> expected_lines(std::string_view input) {
  std::vector<std::string_view> lines;
  while (!input.empty()) {
    const size_t nl = input.find('\n');
    std::string_view line = input.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    input.remove_prefix(nl == std::string_view::npos ? input.size() : nl + 1);
  }
  return lines;
}

void write_file(const std::string& path, std::string_view bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(f != nullptr);
  FUZZ_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  FUZZ_CHECK(std::fclose(f) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t max_line_bytes = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t cut = rest.size() * data[1] / 255;
  const std::string_view inputs[2] = {rest.substr(0, cut), rest.substr(cut)};

  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp != nullptr ? tmp : "/tmp") + "/kpipe-line-feed-fuzz-" +
           std::to_string(::getpid());
  }();
  const std::string paths[2] = {dir + "-0", dir + "-1"};
  write_file(paths[0], inputs[0]);
  write_file(paths[1], inputs[1]);

  kpipe::FieldSet fields;
  fields.add(kpipe::FieldPath::parse(".value").value());
  kpipe::JsonReader reader;
  std::vector<kpipe::JsonField> direct;
  {
    kpipe::LineFeed feed({paths[0], paths[1]}, max_line_bytes, &fields);
    for (size_t i = 0; i < 2; ++i) {
      const auto want = expected_lines(inputs[i]);
      for (size_t n = 0; n < want.size(); ++n) {
        kpipe::Line line;
        const kpipe::ParsedLine* parsed = nullptr;
        auto more = feed.next(line, parsed);
        FUZZ_CHECK(more.ok() && *more);
        FUZZ_CHECK(line.text == want[n]);
        FUZZ_CHECK(line.number == n + 1);
        FUZZ_CHECK(line.input == paths[i]);
        FUZZ_CHECK(line.too_long == (line.text.size() > max_line_bytes));
        // The padding a parser may read.
        volatile unsigned sum = 0;
        for (size_t k = 0; k < kpipe::kJsonPadding; ++k)
          sum = sum + static_cast<unsigned char>(line.text.data()[line.text.size() + k]);
        const bool record = !line.too_long && !kpipe::is_blank_line(line.text) &&
                            !kpipe::is_control_line(line.text);
        FUZZ_CHECK((parsed != nullptr) == record);
        if (parsed == nullptr) continue;
        kpipe::fuzz::PaddedInput alone(line.text);
        const kpipe::Status status = reader.read(alone.view(), fields, direct);
        FUZZ_CHECK(status.ok() == parsed->status.ok());
        if (!status.ok()) continue;
        FUZZ_CHECK(parsed->root_type == reader.root_type());
        FUZZ_CHECK(parsed->values[0].type == direct[0].type);
        FUZZ_CHECK(parsed->values[0].raw == direct[0].raw);
      }
    }
    kpipe::Line line;
    const kpipe::ParsedLine* parsed = nullptr;
    auto more = feed.next(line, parsed);
    FUZZ_CHECK(more.ok() && !*more);
  }
  ::unlink(paths[0].c_str());
  ::unlink(paths[1].c_str());
  return 0;
}
