// Envelope decoding (kpipe(7), THE ENVELOPE; kpipe/envelope.h), base64 fields
// included. Properties: an envelope that reads is written back by
// EnvelopeWriter to a line that reads to the same record (topic, partition,
// offset, timestamp, key and value bytes, headers); writing that record
// again gives the same line (a fixed point); the reader with and without
// keep_json agrees; lines are read from an exactly padded heap buffer.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "kpipe/envelope.h"

namespace {

using kpipe::EnvelopeRecord;
using kpipe::RecordView;

std::string write(kpipe::EnvelopeWriter& writer, const EnvelopeRecord& r) {
  RecordView v;
  v.topic = r.topic ? std::string_view(*r.topic) : std::string_view();
  v.partition = r.partition.value_or(-1);
  v.offset = r.offset.value_or(-1);
  v.timestamp = r.timestamp.value_or(-1);
  if (r.key) v.key = std::string_view(*r.key);
  v.key_as = r.key_is_bytes ? RecordView::As::kBytes : RecordView::As::kString;
  if (r.value) v.value = std::string_view(*r.value);
  // A value that came as a JSON string stays a string; one that came as
  // JSON is embedded as JSON again; bytes stay base64.
  if (r.value_is_bytes)
    v.value_as = RecordView::As::kBytes;
  else if (r.value_json && !r.value_json->empty() && r.value_json->front() == '"')
    v.value_as = RecordView::As::kString;
  else
    v.value_as = RecordView::As::kAuto;
  for (const auto& h : r.headers) {
    kpipe::Header header;
    header.name = h.name;
    if (h.value) header.value = std::string_view(*h.value);
    v.headers.push_back(header);
  }
  std::string out;
  writer.append(out, v);
  FUZZ_CHECK(!out.empty() && out.back() == '\n');
  out.pop_back();
  return out;
}

void check_same(const EnvelopeRecord& a, const EnvelopeRecord& b) {
  FUZZ_CHECK(a.topic.value_or("") == b.topic.value_or(""));
  FUZZ_CHECK(a.partition.value_or(-1) == b.partition.value_or(-1));
  FUZZ_CHECK(a.offset.value_or(-1) == b.offset.value_or(-1));
  // The writer writes no timestamp before the epoch (null).
  const int64_t ta = a.timestamp.value_or(-1);
  FUZZ_CHECK((ta >= 0 ? ta : -1) == b.timestamp.value_or(-1));
  FUZZ_CHECK(a.key == b.key);
  FUZZ_CHECK(a.value == b.value);
  FUZZ_CHECK(a.headers.size() == b.headers.size());
  for (size_t i = 0; i < a.headers.size(); ++i) {
    FUZZ_CHECK(a.headers[i].name == b.headers[i].name);
    FUZZ_CHECK(a.headers[i].value == b.headers[i].value);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kpipe::fuzz::PaddedInput input(data, size);
  const std::string_view line = input.view();

  kpipe::EnvelopeReader plain(false);
  kpipe::EnvelopeReader keeping(true);
  EnvelopeRecord a;
  EnvelopeRecord k;
  const kpipe::Status plain_read = plain.read(line, a);
  const kpipe::Status keep_read = keeping.read(line, k);
  (void)kpipe::source_position(line);
  // keep_json accepts more keys (any JSON value), never fewer lines.
  if (plain_read.ok()) {
    FUZZ_CHECK(keep_read.ok());
    FUZZ_CHECK(a.value == k.value && a.key == k.key);
  }
  if (!keep_read.ok()) return 0;

  kpipe::EnvelopeWriter writer;
  const std::string first = write(writer, k);
  kpipe::fuzz::PaddedInput first_input(first);
  EnvelopeRecord b;
  const kpipe::Status again = keeping.read(first_input.view(), b);
  FUZZ_CHECK(again.ok());
  check_same(k, b);
  const std::string second = write(writer, b);
  FUZZ_CHECK(first == second);

  auto pos = kpipe::source_position(first_input.view());
  if (pos) {
    FUZZ_CHECK(pos->topic == k.topic.value_or(""));
    FUZZ_CHECK(pos->offset == k.offset.value_or(-1));
  }
  return 0;
}
