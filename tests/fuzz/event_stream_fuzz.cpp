// AWS's event-stream framing (kpipe/kinesis/event_stream.h), which
// SubscribeToShard's answers come in from the network: any bytes are
// decoded or refused without a crash, cut in two anywhere they decode as
// in one piece, and every message decoded encodes (its headers as
// strings) to bytes that decode to it again.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "kpipe/kinesis/event_stream.h"

namespace {

struct Decoded {
  bool ok = true;
  std::vector<kpipe::EventMessage> messages;
};

Decoded decode(std::string_view a, std::string_view b) {
  kpipe::EventStreamDecoder d;
  Decoded out;
  for (std::string_view part : {a, b}) {
    kpipe::Status s = d.feed(part);
    for (auto& m : d.messages()) out.messages.push_back(std::move(m));
    d.messages().clear();
    if (!s.ok()) {
      out.ok = false;
      break;
    }
  }
  return out;
}

bool same(const std::vector<kpipe::EventMessage>& x, const std::vector<kpipe::EventMessage>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].headers != y[i].headers || x[i].payload != y[i].payload) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kpipe::fuzz::ExactInput input(data, size);
  const std::string_view bytes = input.view();
  Decoded whole = decode(bytes, {});
  size_t cut = bytes.empty() ? 0 : static_cast<unsigned char>(bytes[0]) % (bytes.size() + 1);
  Decoded split = decode(bytes.substr(0, cut), bytes.substr(cut));
  FUZZ_CHECK(whole.ok == split.ok);
  FUZZ_CHECK(same(whole.messages, split.messages));
  for (const auto& m : whole.messages) {
    bool fits = true;
    for (const auto& [name, value] : m.headers)
      fits = fits && name.size() <= 255 && value.size() <= 65535;
    if (!fits) continue;
    Decoded again = decode(kpipe::encode_event_message(m.headers, m.payload), {});
    FUZZ_CHECK(again.ok);
    FUZZ_CHECK(again.messages.size() == 1);
    FUZZ_CHECK(again.messages[0].headers == m.headers);
    FUZZ_CHECK(again.messages[0].payload == m.payload);
  }
  return 0;
}
