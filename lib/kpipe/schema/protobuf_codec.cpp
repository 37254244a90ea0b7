#include "kpipe/schema/protobuf_codec.h"

namespace kpipe {

namespace {

class Stub : public ValueCodec {
 public:
  Expected<int32_t> decode(std::string_view, std::string&) override {
    return failure("protobuf: not built yet");
  }
  Status encode(std::string_view, int32_t, std::string&) override {
    return failure("protobuf: not built yet");
  }
};

}  // namespace

std::unique_ptr<ValueCodec> make_protobuf_codec(SchemaRegistry&, const DecodeOptions&) {
  return std::make_unique<Stub>();
}

}  // namespace kpipe
