// Protobuf messages in and out as JSON (the proto3 JSON mapping), with the
// registry's .proto files parsed at run time by libprotoc.
#pragma once

#include <memory>
#include <string>

#include "kpipe/schema/codec.h"

namespace kpipe {

// Decoding writes what the proto3 JSON mapping writes (lowerCamelCase
// names, 64-bit integers as strings, enums by name, bytes in base64,
// Timestamps in RFC 3339), every field of proto3 scalars included; neither
// of `options`' settings applies to it. Encoding writes the first message of
// the schema (message index [0]).
std::unique_ptr<ValueCodec> make_protobuf_codec(SchemaRegistry& registry,
                                                const DecodeOptions& options);
// The same, but encoding writes the message `encode_message` (a full name,
// "orders.Order.Line") of the schema's own file, with its message indexes;
// empty: the first message.
std::unique_ptr<ValueCodec> make_protobuf_codec(SchemaRegistry& registry,
                                                const DecodeOptions& options,
                                                std::string encode_message);

}  // namespace kpipe
