// Avro values in and out as JSON, with Apache Avro's C library (libavro).
#pragma once

#include <memory>

#include "kpipe/schema/codec.h"

namespace kpipe {

std::unique_ptr<ValueCodec> make_avro_codec(SchemaRegistry& registry, const DecodeOptions& options);

}  // namespace kpipe
