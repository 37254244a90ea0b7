#include "kpipe/schema/json_schema_codec.h"

namespace kpipe {

namespace {

class Stub : public ValueCodec {
 public:
  Expected<int32_t> decode(std::string_view, std::string&) override {
    return failure("json-schema: not built yet");
  }
  Status encode(std::string_view, int32_t, std::string&) override {
    return failure("json-schema: not built yet");
  }
};

}  // namespace

std::unique_ptr<ValueCodec> make_json_schema_codec(SchemaRegistry&) {
  return std::make_unique<Stub>();
}

}  // namespace kpipe
