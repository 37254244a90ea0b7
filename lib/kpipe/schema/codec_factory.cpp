#include "kpipe/schema/codec_factory.h"

#include "kpipe/schema/avro_codec.h"
#include "kpipe/schema/json_schema_codec.h"
#include "kpipe/schema/protobuf_codec.h"

namespace kpipe {

std::unique_ptr<ValueCodec> make_codec(PayloadFormat format, SchemaRegistry& registry,
                                       const DecodeOptions& options) {
  switch (format) {
    case PayloadFormat::kAvro:
      return make_avro_codec(registry, options);
    case PayloadFormat::kProtobuf:
      return make_protobuf_codec(registry, options);
    case PayloadFormat::kJsonSchema:
      return make_json_schema_codec(registry);
    default:
      return nullptr;
  }
}

}  // namespace kpipe
