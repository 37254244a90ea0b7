// Protobuf messages in and out as JSON (the proto3 JSON mapping), with the
// registry's .proto files parsed at run time by libprotoc.
#pragma once

#include <memory>

#include "kpipe/schema/codec.h"

namespace kpipe {

std::unique_ptr<ValueCodec> make_protobuf_codec(SchemaRegistry& registry,
                                                const DecodeOptions& options);

}  // namespace kpipe
