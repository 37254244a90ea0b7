// Avro values in and out as JSON, with Apache Avro's C library (libavro).
#pragma once

#include <memory>

#include "kpipe/schema/codec.h"

namespace kpipe {

// Decoding reads a payload with its writer schema only (the id's; no
// reader schema, no resolution) and writes plain JSON: records as objects
// in field order, enums as their symbols, maps as objects, bytes and fixed
// in base64, a union as its branch's value alone, NaN and infinities as
// the strings "NaN", "Infinity", "-Infinity", and logical types converted:
// timestamp-millis/-micros as RFC 3339 UTC ("2026-11-29T10:15:30.123Z",
// six decimals for micros; epoch milliseconds with options.epoch_millis,
// micros as a fraction), local-timestamp-* the same without the Z, date as
// "yyyy-mm-dd", time-millis/-micros as "hh:mm:ss.sss[sss]", decimal as an
// exact string ("-12.34"), uuid as its string. Times and dates outside the
// years 0000-9999 stay numbers. With options.avro_standard_json, Avro's
// own JSON encoding instead: unions wrapped as {"type name": value}, bytes
// and fixed as strings of code points U+0000-U+00FF, logical types as the
// values beneath them.
//
// Encoding takes all of that back (plain or Avro's form, timestamps as
// RFC 3339 with any offset or as epoch milliseconds, decimals as strings or
// numbers), fills a missing record field with its default and refuses
// unknown fields. A union takes {"type name": value} (an object of one
// member named after a branch is always read so), else the branch that
// the JSON value's type suits: null; boolean; an integer an int, then a
// long, then a float or double; other numbers a float or double; a string
// a string, then an enum that has the symbol, then bytes, fixed and the
// logical types that read strings; an object the first record whose
// fields without defaults are all there, else a map; an array an array.
std::unique_ptr<ValueCodec> make_avro_codec(SchemaRegistry& registry, const DecodeOptions& options);

}  // namespace kpipe
