// Private to the Avro codec (schema/avro_*.cpp): what its pieces share.
// The schema compiled into a table of nodes (avro_schema.cpp), the JSON
// writers that decoding writes through (avro_json_writer.cpp), the ways
// around libavro's gaps (avro_workarounds.cpp), and the codec itself, whose
// face is in avro_codec.cpp, its decoding in avro_decode.cpp and its
// encoding in avro_encode.cpp. Nothing outside schema/ includes this file
// but its tests.
#pragma once

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <avro.h>
#include <simdjson.h>

#include "kpipe/json.h"
#include "kpipe/schema/codec.h"

namespace kpipe::avro {

namespace dom = simdjson::dom;

// --- JSON writers (avro_json_writer.cpp) -------------------------------------

// Decoded JSON goes straight into the caller's string through a pointer:
// one room check per value, not one per character.
class JsonOut {
 public:
  explicit JsonOut(std::string& s) : s_(s), start_(s.size()), pos_(s.size()) {}
  // Room for n more bytes at where().
  char* room(size_t n) {
    if (s_.size() - pos_ < n) s_.resize(pos_ + n + 256 + (pos_ - start_));
    return s_.data() + pos_;
  }
  void advance(size_t n) { pos_ += n; }
  void advance_to(const char* p) { pos_ = static_cast<size_t>(p - s_.data()); }
  void put(char c) { *room(1) = c, ++pos_; }
  void put(const char* p, size_t n) {
    std::memcpy(room(n), p, n);
    pos_ += n;
  }
  void put(std::string_view t) { put(t.data(), t.size()); }
  // The string as far as written, for the helpers that append to one;
  // resume() takes up after them.
  std::string& string() {
    s_.resize(pos_);
    return s_;
  }
  void resume() { pos_ = s_.size(); }
  void finish() { s_.resize(pos_); }

 private:
  std::string& s_;
  size_t start_;
  size_t pos_;
};

// A short JSON text written often (a key, a symbol): copied as 32 bytes at
// once, which a compiler does without a call, when it fits.
class Snippet {
 public:
  Snippet() = default;
  explicit Snippet(std::string text) : text_(std::move(text)) {
    if (text_.size() <= padded_.size()) std::memcpy(padded_.data(), text_.data(), text_.size());
  }
  void put(JsonOut& out) const {
    if (text_.size() > padded_.size()) return out.put(text_);
    std::memcpy(out.room(padded_.size()), padded_.data(), padded_.size());
    out.advance(text_.size());
  }

 private:
  std::string text_;
  std::array<char, 32> padded_{};
};

inline char* write_digits(char* p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) {
    p[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return p + n;
}

// JSON cannot hold NaN or an infinity: they are written as the strings
// Avro's Java JSON encoder uses.
inline bool put_non_finite(JsonOut& out, double v) {
  if (std::isnan(v)) {
    out.put("\"NaN\"");
    return true;
  }
  if (std::isinf(v)) {
    out.put(v > 0 ? std::string_view("\"Infinity\"") : std::string_view("\"-Infinity\""));
    return true;
  }
  return false;
}

inline void put_int(JsonOut& out, int64_t v) {
  char* p = out.room(24);
  out.advance_to(std::to_chars(p, p + 24, v).ptr);
}

void put_float(JsonOut& out, float v);

// Most doubles in records are amounts with a few decimals, whose shortest
// text is found here sooner than by the general search (std::to_chars,
// as append_double writes every other double): the fewest decimals whose
// number reads back as `v`. Integers are left to append_double.
bool put_short_decimal(JsonOut& out, double v);

// A count of `per_milli`ths of a millisecond as milliseconds: "-0.001" for
// -1 microsecond.
void put_scaled_millis(JsonOut& out, int64_t v, int64_t per_milli, int fraction_digits);

// Bytes in Avro's JSON encoding: each byte the code point of the same value.
void put_code_points(JsonOut& out, const unsigned char* b, size_t n);

// A string as JSON, the escapes as append_json_string writes them; false
// (and nothing written) when it is not UTF-8, as every Avro string must be.
bool put_json_string(JsonOut& out, const char* s, size_t n);

// hh:mm:ss and the fraction's digits, quoted.
void put_time_of_day(JsonOut& out, int64_t ms, uint64_t fraction, int fraction_digits);

// --- the schema, as the codec walks it (avro_schema.cpp) -------------------
//
// A table of nodes beside libavro's schema, for what libavro drops; every
// decision that does not depend on the data is made once, in the table.

enum class Kind : uint8_t {
  kNull,
  kBoolean,
  kInt,
  kLong,
  kFloat,
  kDouble,
  kBytes,
  kString,
  kRecord,
  kEnum,
  kArray,
  kMap,
  kUnion,
  kFixed,
};

enum class Logical : uint8_t {
  kNone,
  kDate,                  // int: days since the epoch
  kTimeMillis,            // int
  kTimeMicros,            // long
  kTimestampMillis,       // long
  kTimestampMicros,       // long
  kLocalTimestampMillis,  // long
  kLocalTimestampMicros,  // long
  kDecimal,               // bytes or fixed
  kUuid,                  // string
};

struct Field {
  std::string name;
  Snippet key;  // `"name":`, after a comma but for the first field
  uint32_t type = 0;
  bool has_default = false;
  dom::element default_value;  // in the schema's own parsed JSON
};

struct Node {
  Kind kind = Kind::kNull;
  Logical logical = Logical::kNone;
  int32_t precision = 0;  // decimal
  int32_t scale = 0;      // decimal
  int64_t size = 0;       // fixed
  std::string name;       // named types: the full name
  std::string short_name;
  // The name of this type as a union branch in Avro's JSON encoding, and
  // the text that opens such a wrapped branch.
  std::string branch_name;
  Snippet wrap;
  std::vector<uint32_t> children;  // union branches; array items; map values
  std::vector<Field> fields;
  std::vector<std::string> symbols;
  std::vector<Snippet> symbol_json;
};

inline bool is_named(Kind k) {
  return k == Kind::kRecord || k == Kind::kEnum || k == Kind::kFixed;
}

// The fields of a record at a fixed place in the reused value (the root,
// or a record field of one): libavro's generic records keep their fields
// at fixed offsets, so their handles are taken once, not per record.
struct FixedRecord {
  std::vector<avro_value_t> fields;
  std::vector<int32_t> nested;  // a record field's own FixedRecord, else -1
};

// One registered schema, compiled: libavro's schema, its generic class and
// one value reused for every record, with the node table beside them.
struct Compiled {
  int32_t id = 0;
  dom::parser json;  // owns the schema's JSON, where the defaults are
  std::vector<Node> nodes;
  uint32_t root = 0;
  avro_schema_t schema = nullptr;
  avro_value_iface_t* iface = nullptr;
  avro_value_t value{};
  bool has_value = false;
  std::vector<FixedRecord> fixed;  // [0] is the root's, if it is a record

  Compiled() = default;
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;
  ~Compiled() {
    if (has_value) avro_value_decref(&value);
    if (iface != nullptr) avro_value_iface_decref(iface);
    if (schema != nullptr) avro_schema_decref(schema);
  }
};

// The schema's JSON read into its node table, checked against libavro's
// reading of it, with libavro's class and reused value made; a data error
// says why it cannot be used.
Expected<std::unique_ptr<Compiled>> compile(const RegisteredSchema& registered);

// --- around libavro (avro_workarounds.cpp) -----------------------------------

// Sets libavro's allocator to the codec's (once per process).
void use_block_allocator();

// While a payload is read, no block libavro asks for may be larger than
// the limit given: a hostile length (a string said to hold a gigabyte, in a
// payload of ten bytes) or count fails the read, instead of the process or
// its memory (libavro 1.11 leaks a string buffer whose bytes then run
// short).
class ReadLimit {
 public:
  explicit ReadLimit(size_t most);
  ~ReadLimit();
  ReadLimit(const ReadLimit&) = delete;
  ReadLimit& operator=(const ReadLimit&) = delete;
};

// libavro's memory reader, which cannot tell how much of a payload it has
// read.
class MemoryReader {
 public:
  MemoryReader();
  ~MemoryReader();
  MemoryReader(const MemoryReader&) = delete;
  MemoryReader& operator=(const MemoryReader&) = delete;

  avro_reader_t get() const { return reader_; }
  void set_source(std::string_view payload);
  // How much of the payload the reader has read.
  size_t bytes_read();

 private:
  avro_reader_t reader_ = nullptr;
  bool mirror_fits_ = false;
  int64_t payload_size_ = 0;
};

// --- decimals, both ways -----------------------------------------------------

// Negates a two's complement integer in place, its bytes taken from the
// least significant.
template <class It>
void negate_twos_complement(It least, It end) {
  unsigned carry = 1;
  for (; least != end; ++least) {
    unsigned x = static_cast<unsigned char>(~*least) + carry;
    *least = static_cast<uint8_t>(x);
    carry = x >> 8;
  }
}

// --- the codec (avro_codec.cpp, avro_decode.cpp, avro_encode.cpp) ------------

// One step of a path from the value's root, for messages.
struct PathStep {
  std::string_view key;
  size_t index = 0;
  bool is_index = false;
};

// The path as messages name a field: items[2].price.
std::string format_path(const PathStep* steps, size_t n);

// The codec: a cache of compiled schemas, and the scratch that decoding
// and encoding reuse from record to record.
class AvroCodec final : public ValueCodec {
 public:
  AvroCodec(SchemaRegistry& registry, const DecodeOptions& options);
  ~AvroCodec() override;

  Expected<int32_t> decode(std::string_view bytes, std::string& out) override;
  Status encode(std::string_view json, int32_t schema_id, std::string& out) override;

 private:
  Expected<Compiled*> schema(int32_t id);

  // Decoding (avro_decode.cpp): the value to JSON. False on a value that JSON cannot take;
  // decode_error_ says why and decode_path_ where (innermost first).
  bool write(const Compiled& c, uint32_t at, avro_value_t* v, JsonOut& out);
  bool write_record(const Compiled& c, const Node& n, avro_value_t* v, const FixedRecord* fixed,
                    JsonOut& out);
  void write_long(const Node& n, int64_t v, JsonOut& out);
  void write_int(const Node& n, int32_t v, JsonOut& out);
  void write_timestamp(JsonOut& out, int64_t v, bool micros, bool local);
  void write_decimal(JsonOut& out, const unsigned char* b, size_t n, int32_t scale);
  bool decode_fault(const char* why) {
    decode_error_ = why;
    return false;
  }

  // Encoding (avro_encode.cpp): JSON to the value.
  Status build(const Compiled& c, uint32_t at, dom::element e, avro_value_t* v, bool in_default);
  Status build_record(const Compiled& c, const Node& n, dom::element e, avro_value_t* v,
                      bool in_default);
  Status build_union(const Compiled& c, const Node& n, dom::element e, avro_value_t* v,
                     bool in_default);
  Status build_long(const Node& n, dom::element e, avro_value_t* v, bool raw);
  Status build_int(const Node& n, dom::element e, avro_value_t* v);
  Status build_real(const Node& n, dom::element e, avro_value_t* v);
  Status build_bytes(const Node& n, dom::element e, avro_value_t* v, bool raw);
  Status set_decimal(const Node& n, std::string_view text, avro_value_t* v);
  Status set_bytes_or_fixed(const Node& n, void* data, size_t size, avro_value_t* v);
  Status avro_fault(const char* what);
  Error field_error(std::string_view why) const;
  Error mismatch(const char* expected, dom::element e) const;
  int rank(const Compiled& c, uint32_t branch, dom::element e);

  SchemaRegistry& registry_;
  DecodeOptions options_;
  std::unordered_map<int32_t, std::unique_ptr<Compiled>> cache_;
  Compiled* last_ = nullptr;  // the last id's schema: records mostly share one
  MemoryReader reader_;
  avro_writer_t writer_ = nullptr;

  const char* decode_error_ = "";
  std::vector<PathStep> decode_path_;
  std::vector<uint8_t> big_;  // scratch for decimals beyond 64 bits
  std::string digits_;        // scratch for decimal digits

  std::string padded_;  // the JSON to encode, with simdjson's padding
  dom::parser parser_;
  std::unique_ptr<PayloadEncoder> json_checker_;  // made on the first bad JSON
  std::vector<PathStep> path_;
  std::vector<uint8_t> seen_;  // record fields present, a stretch per nested record
  std::string scratch_;
  std::vector<std::pair<int, uint32_t>> candidates_;
};

}  // namespace kpipe::avro
