// JSON Schema payloads: the JSON as it is, framed with its schema's id.
#pragma once

#include <memory>

#include "kpipe/schema/codec.h"

namespace kpipe {

std::unique_ptr<ValueCodec> make_json_schema_codec(SchemaRegistry& registry);

}  // namespace kpipe
