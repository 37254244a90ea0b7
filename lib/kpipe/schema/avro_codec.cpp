#include "kpipe/schema/avro_codec.h"

namespace kpipe {

namespace {

class Stub : public ValueCodec {
 public:
  Expected<int32_t> decode(std::string_view, std::string&) override {
    return failure("avro: not built yet");
  }
  Status encode(std::string_view, int32_t, std::string&) override {
    return failure("avro: not built yet");
  }
};

}  // namespace

std::unique_ptr<ValueCodec> make_avro_codec(SchemaRegistry&, const DecodeOptions&) {
  return std::make_unique<Stub>();
}

}  // namespace kpipe
