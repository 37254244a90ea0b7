// The one place that knows every concrete codec: it picks one for a
// payload format. Kept apart from codec.h, the interface, so that the
// interface depends on no implementation and each codec (which includes
// codec.h) is not included back by it (docs/architecture.md).
#pragma once

#include <memory>

#include "kpipe/schema/codec.h"

namespace kpipe {

// A codec for avro, protobuf or json-schema; nullptr for the formats that
// need none (json, string, bytes). `registry` outlives it.
std::unique_ptr<ValueCodec> make_codec(PayloadFormat format, SchemaRegistry& registry,
                                       const DecodeOptions& options);

}  // namespace kpipe
