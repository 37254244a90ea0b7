#include "kpipe/schema/avro_codec.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <malloc.h>

#include <avro.h>
#include <simdjson.h>

#include "kpipe/json.h"
#include "kpipe/time.h"

namespace kpipe {

namespace {

namespace dom = simdjson::dom;

// --- the schema, as this codec walks it ---------------------------------------
//
// libavro 1.11 reads and writes the bytes but drops what a JSON mapping
// needs: logical types, defaults, the names that wrap union branches. So the
// schema's JSON is also read here into a table of nodes, one per type (a
// named type once, however often it is referenced), and checked to have the
// shape libavro gave it. Every decision that does not depend on the data
// (the kind, the logical type, the JSON text of keys and symbols) is made
// once, here, not per record.

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

bool is_named(Kind k) {
  return k == Kind::kRecord || k == Kind::kEnum || k == Kind::kFixed;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kNull:
      return "null";
    case Kind::kBoolean:
      return "boolean";
    case Kind::kInt:
      return "int";
    case Kind::kLong:
      return "long";
    case Kind::kFloat:
      return "float";
    case Kind::kDouble:
      return "double";
    case Kind::kBytes:
      return "bytes";
    case Kind::kString:
      return "string";
    case Kind::kRecord:
      return "record";
    case Kind::kEnum:
      return "enum";
    case Kind::kArray:
      return "array";
    case Kind::kMap:
      return "map";
    case Kind::kUnion:
      return "union";
    case Kind::kFixed:
      return "fixed";
  }
  return "?";
}

bool primitive_kind(std::string_view name, Kind& kind) {
  static constexpr std::pair<std::string_view, Kind> kPrimitives[] = {
      {"null", Kind::kNull},   {"boolean", Kind::kBoolean}, {"int", Kind::kInt},
      {"long", Kind::kLong},   {"float", Kind::kFloat},     {"double", Kind::kDouble},
      {"bytes", Kind::kBytes}, {"string", Kind::kString},
  };
  for (const auto& [n, k] : kPrimitives)
    if (n == name) {
      kind = k;
      return true;
    }
  return false;
}

std::string json_string(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

// Builds the node table from the schema's JSON, resolving names as the
// specification says: a name with a dot is full, others take the namespace
// given or the enclosing one.
class SchemaReader {
 public:
  explicit SchemaReader(std::vector<Node>& nodes) : nodes_(nodes) {}

  Expected<uint32_t> read(dom::element e, const std::string& ns) {
    switch (e.type()) {
      case dom::element_type::STRING:
        return read_name(std::string_view(e.get_string().value_unsafe()), ns);
      case dom::element_type::ARRAY: {
        uint32_t at = add(Kind::kUnion);
        dom::array branches = e.get_array().value_unsafe();
        for (dom::element branch : branches) {
          auto b = read(branch, ns);
          if (!b) return b;
          if (nodes_[*b].kind == Kind::kUnion) return bad("a union directly inside a union");
          nodes_[at].children.push_back(*b);
        }
        if (nodes_[at].children.empty()) return bad("a union without branches");
        return at;
      }
      case dom::element_type::OBJECT:
        return read_object(e.get_object().value_unsafe(), ns);
      default:
        return bad("a type that is neither a name, an object nor a union");
    }
  }

 private:
  static Error bad(std::string_view why) { return data_error("{}", why); }

  uint32_t add(Kind kind) {
    nodes_.emplace_back();
    nodes_.back().kind = kind;
    nodes_.back().branch_name = kind_name(kind);
    return static_cast<uint32_t>(nodes_.size() - 1);
  }

  Expected<uint32_t> read_name(std::string_view name, const std::string& ns) {
    Kind kind;
    if (primitive_kind(name, kind)) return add(kind);
    if (name.find('.') == std::string_view::npos && !ns.empty()) {
      auto it = named_.find(ns + "." + std::string(name));
      if (it != named_.end()) return it->second;
    }
    auto it = named_.find(std::string(name));
    if (it != named_.end()) return it->second;
    return data_error("unknown type '{}'", name);
  }

  // The full name of a named type, and the namespace of the types inside it.
  Expected<std::pair<std::string, std::string>> full_name(dom::object o, const std::string& ns) {
    std::string_view name;
    if (o["name"].get(name)) return bad("a named type without a \"name\"");
    std::string full(name);
    if (name.find('.') == std::string_view::npos) {
      std::string_view space;
      std::string inner = o["namespace"].get(space) ? ns : std::string(space);
      if (!inner.empty()) full = inner + "." + full;
    }
    size_t dot = full.rfind('.');
    std::string inner = dot == std::string::npos ? std::string() : full.substr(0, dot);
    if (named_.count(full)) return data_error("type '{}' is defined twice", full);
    return std::make_pair(full, inner);
  }

  void name_node(uint32_t at, const std::string& full) {
    Node& n = nodes_[at];
    n.name = full;
    size_t dot = full.rfind('.');
    n.short_name = dot == std::string::npos ? full : full.substr(dot + 1);
    n.branch_name = full;
    named_[full] = at;
  }

  Expected<uint32_t> read_object(dom::object o, const std::string& ns) {
    dom::element type;
    if (o["type"].get(type)) return bad("a type object without \"type\"");
    if (type.type() != dom::element_type::STRING) return read(type, ns);
    std::string_view t = type.get_string().value_unsafe();
    Kind kind;
    if (primitive_kind(t, kind)) {
      uint32_t at = add(kind);
      read_logical(o, at);
      return at;
    }
    if (t == "record" || t == "error") return read_record(o, ns);
    if (t == "enum") {
      auto names = full_name(o, ns);
      if (!names) return names.take_error();
      uint32_t at = add(Kind::kEnum);
      name_node(at, names->first);
      dom::array symbols;
      if (o["symbols"].get(symbols)) return bad("an enum without \"symbols\"");
      for (dom::element s : symbols) {
        std::string_view symbol;
        if (s.get(symbol)) return bad("an enum symbol that is not a string");
        nodes_[at].symbols.emplace_back(symbol);
        nodes_[at].symbol_json.emplace_back(json_string(symbol));
      }
      return at;
    }
    if (t == "array" || t == "map") {
      dom::element inner;
      if (o[t == "array" ? "items" : "values"].get(inner))
        return data_error("an {} without \"{}\"", t, t == "array" ? "items" : "values");
      uint32_t at = add(t == "array" ? Kind::kArray : Kind::kMap);
      auto child = read(inner, ns);
      if (!child) return child;
      nodes_[at].children.push_back(*child);
      return at;
    }
    if (t == "fixed") {
      auto names = full_name(o, ns);
      if (!names) return names.take_error();
      int64_t size = 0;
      if (o["size"].get(size) || size < 0) return bad("a fixed without a valid \"size\"");
      uint32_t at = add(Kind::kFixed);
      name_node(at, names->first);
      nodes_[at].size = size;
      read_logical(o, at);
      return at;
    }
    return read_name(t, ns);
  }

  Expected<uint32_t> read_record(dom::object o, const std::string& ns) {
    auto names = full_name(o, ns);
    if (!names) return names.take_error();
    uint32_t at = add(Kind::kRecord);
    // Named before its fields are read: a field may refer to the record.
    name_node(at, names->first);
    dom::array fields;
    if (o["fields"].get(fields)) return bad("a record without \"fields\"");
    for (dom::element f : fields) {
      dom::object field;
      std::string_view name;
      dom::element type;
      if (f.get(field) || field["name"].get(name) || field["type"].get(type))
        return data_error("record {}: a field without \"name\" or \"type\"", names->first);
      auto child = read(type, names->second);
      if (!child) return child;
      Field out;
      out.name = std::string(name);
      std::string key = nodes_[at].fields.empty() ? "" : ",";
      append_json_string(key, name);
      key.push_back(':');
      out.key = Snippet(std::move(key));
      out.type = *child;
      out.has_default = !field["default"].get(out.default_value);
      nodes_[at].fields.push_back(std::move(out));
    }
    return at;
  }

  // A logical type that does not fit its type is ignored, as the
  // specification says: the value is read as the type beneath.
  void read_logical(dom::object o, uint32_t at) {
    std::string_view logical;
    if (o["logicalType"].get(logical)) return;
    Node& n = nodes_[at];
    struct Known {
      std::string_view name;
      Kind kind;
      Logical logical;
    };
    static constexpr Known kKnown[] = {
        {"date", Kind::kInt, Logical::kDate},
        {"time-millis", Kind::kInt, Logical::kTimeMillis},
        {"time-micros", Kind::kLong, Logical::kTimeMicros},
        {"timestamp-millis", Kind::kLong, Logical::kTimestampMillis},
        {"timestamp-micros", Kind::kLong, Logical::kTimestampMicros},
        {"local-timestamp-millis", Kind::kLong, Logical::kLocalTimestampMillis},
        {"local-timestamp-micros", Kind::kLong, Logical::kLocalTimestampMicros},
        {"uuid", Kind::kString, Logical::kUuid},
    };
    for (const auto& k : kKnown)
      if (k.name == logical && k.kind == n.kind) n.logical = k.logical;
    if (logical != "decimal" || (n.kind != Kind::kBytes && n.kind != Kind::kFixed)) return;
    int64_t precision = 0, scale = 0;
    if (o["precision"].get(precision) || precision <= 0 || precision > 100'000) return;
    if (auto s = o["scale"]; !s.error() && (s.get(scale) || scale < 0)) return;
    if (scale > precision) return;
    // The digits a fixed of n bytes holds: floor(log10(2^(8n-1) - 1)).
    if (n.kind == Kind::kFixed &&
        (n.size == 0 || static_cast<double>(precision) >
                            std::floor(static_cast<double>(8 * n.size - 1) * std::log10(2.0))))
      return;
    n.logical = Logical::kDecimal;
    n.precision = static_cast<int32_t>(precision);
    n.scale = static_cast<int32_t>(scale);
  }

  std::vector<Node>& nodes_;
  std::unordered_map<std::string, uint32_t> named_;
};

// Whether libavro read the schema as this codec did: the same kinds, field
// counts, symbols and branches. (Both follow one specification; this keeps
// a disagreement from becoming a misread value.)
bool same_shape(avro_schema_t s, const std::vector<Node>& nodes, uint32_t at,
                std::vector<uint8_t>& seen) {
  while (s != nullptr && avro_typeof(s) == AVRO_LINK) s = avro_schema_link_target(s);
  if (s == nullptr) return false;
  const Node& n = nodes[at];
  if (is_named(n.kind)) {
    if (seen[at]) return true;
    seen[at] = 1;
  }
  switch (avro_typeof(s)) {
    case AVRO_STRING:
      return n.kind == Kind::kString;
    case AVRO_BYTES:
      return n.kind == Kind::kBytes;
    case AVRO_INT32:
      return n.kind == Kind::kInt;
    case AVRO_INT64:
      return n.kind == Kind::kLong;
    case AVRO_FLOAT:
      return n.kind == Kind::kFloat;
    case AVRO_DOUBLE:
      return n.kind == Kind::kDouble;
    case AVRO_BOOLEAN:
      return n.kind == Kind::kBoolean;
    case AVRO_NULL:
      return n.kind == Kind::kNull;
    case AVRO_ENUM:
      return n.kind == Kind::kEnum &&
             static_cast<size_t>(avro_schema_enum_number_of_symbols(s)) == n.symbols.size();
    case AVRO_FIXED:
      return n.kind == Kind::kFixed && avro_schema_fixed_size(s) == n.size;
    case AVRO_MAP:
      return n.kind == Kind::kMap &&
             same_shape(avro_schema_map_values(s), nodes, n.children[0], seen);
    case AVRO_ARRAY:
      return n.kind == Kind::kArray &&
             same_shape(avro_schema_array_items(s), nodes, n.children[0], seen);
    case AVRO_UNION:
      if (n.kind != Kind::kUnion || avro_schema_union_size(s) != n.children.size()) return false;
      for (size_t i = 0; i < n.children.size(); ++i)
        if (!same_shape(avro_schema_union_branch(s, static_cast<int>(i)), nodes, n.children[i],
                        seen))
          return false;
      return true;
    case AVRO_RECORD:
      if (n.kind != Kind::kRecord || avro_schema_record_size(s) != n.fields.size()) return false;
      for (size_t i = 0; i < n.fields.size(); ++i)
        if (!same_shape(avro_schema_record_field_get_by_index(s, static_cast<int>(i)), nodes,
                        n.fields[i].type, seen))
          return false;
      return true;
    default:
      return false;
  }
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

// Adds the FixedRecord of the record `at` whose value is `v`, then those of
// its record fields; false if libavro refuses a field.
bool fix_record(Compiled& c, uint32_t at, avro_value_t v, int depth) {
  constexpr int kDeepest = 64;  // records in records this deep are read the usual way
  const size_t index = c.fixed.size();
  c.fixed.emplace_back();
  const size_t count = c.nodes[at].fields.size();
  for (size_t i = 0; i < count; ++i) {
    avro_value_t child;
    if (avro_value_get_by_index(&v, i, &child, nullptr)) return false;
    c.fixed[index].fields.push_back(child);
    c.fixed[index].nested.push_back(-1);
    const uint32_t type = c.nodes[at].fields[i].type;
    if (c.nodes[type].kind != Kind::kRecord || depth >= kDeepest) continue;
    c.fixed[index].nested[i] = static_cast<int32_t>(c.fixed.size());
    if (!fix_record(c, type, child, depth + 1)) return false;
  }
  return true;
}

Expected<std::unique_ptr<Compiled>> compile(const RegisteredSchema& registered) {
  auto c = std::make_unique<Compiled>();
  c->id = registered.id;
  dom::element root;
  if (auto e = c->json.parse(registered.text).get(root))
    return data_error("not valid JSON: {}", simdjson::error_message(e));
  SchemaReader reader(c->nodes);
  auto top = reader.read(root, "");
  if (!top) return top.take_error();
  c->root = *top;
  for (Node& n : c->nodes) {
    std::string wrap = "{";
    append_json_string(wrap, n.branch_name);
    wrap.push_back(':');
    n.wrap = Snippet(std::move(wrap));
  }
  if (avro_schema_from_json_length(registered.text.data(), registered.text.size(), &c->schema))
    return data_error("libavro refuses it: {}", avro_strerror());
  std::vector<uint8_t> seen(c->nodes.size());
  if (!same_shape(c->schema, c->nodes, c->root, seen))
    return data_error("libavro reads it differently (a name resolved otherwise?)");
  c->iface = avro_generic_class_from_schema(c->schema);
  if (c->iface == nullptr) return data_error("libavro cannot use it: {}", avro_strerror());
  if (avro_generic_value_new(c->iface, &c->value))
    return data_error("libavro cannot use it: {}", avro_strerror());
  c->has_value = true;
  if (c->nodes[c->root].kind == Kind::kRecord && !fix_record(*c, c->root, c->value, 0))
    return data_error("libavro cannot use it: {}", avro_strerror());
  return c;
}

// --- small writers -----------------------------------------------------------

char* write_digits(char* p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) {
    p[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return p + n;
}

// JSON cannot hold NaN or an infinity: they are written as the strings
// Avro's Java JSON encoder uses.
bool put_non_finite(JsonOut& out, double v) {
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

void put_int(JsonOut& out, int64_t v) {
  char* p = out.room(24);
  out.advance_to(std::to_chars(p, p + 24, v).ptr);
}

void put_float(JsonOut& out, float v) {
  if (put_non_finite(out, v)) return;
  // A float's own shortest text: 0.1f is "0.1", not the double nearest it.
  if (v == std::trunc(v) && std::fabs(v) < 1e15f) return put_int(out, static_cast<int64_t>(v));
  char* p = out.room(32);
  out.advance_to(std::to_chars(p, p + 32, v).ptr);
}

// Most doubles in records are amounts with a few decimals, whose shortest
// text is found here sooner than by the general search (std::to_chars,
// as append_double writes every other double): the fewest decimals whose
// number reads back as `v`. Integers are left to append_double.
bool put_short_decimal(JsonOut& out, double v) {
  const double a = std::fabs(v);
  if (!(a >= 1 && a < 1e12) || a == std::trunc(a)) return false;
  static constexpr double kScales[] = {10, 100, 1000};
  for (int k = 0; k < 3; ++k) {
    const double m = std::round(a * kScales[k]);
    if (m / kScales[k] != a) continue;
    const auto digits = static_cast<uint64_t>(m);
    const auto scale = static_cast<uint64_t>(kScales[k]);
    char* p = out.room(24);
    if (v < 0) *p++ = '-';
    p = std::to_chars(p, p + 16, digits / scale).ptr;
    *p++ = '.';
    p = write_digits(p, digits % scale, k + 1);
    out.advance_to(p);
    return true;
  }
  return false;
}

// A count of `per_milli`ths of a millisecond as milliseconds: "-0.001" for
// -1 microsecond.
void put_scaled_millis(JsonOut& out, int64_t v, int64_t per_milli, int fraction_digits) {
  uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  char* p = out.room(32);
  if (v < 0) *p++ = '-';
  p = std::to_chars(p, p + 24, mag / static_cast<uint64_t>(per_milli)).ptr;
  if (uint64_t frac = mag % static_cast<uint64_t>(per_milli); frac != 0) {
    *p++ = '.';
    p = write_digits(p, frac, fraction_digits);
  }
  out.advance_to(p);
}

// Bytes in Avro's JSON encoding: each byte the code point of the same value.
void put_code_points(JsonOut& out, const unsigned char* b, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  char* p = out.room(n * 6 + 2);
  *p++ = '"';
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = b[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      *p++ = static_cast<char>(c);
    } else if (c == '"' || c == '\\') {
      *p++ = '\\';
      *p++ = static_cast<char>(c);
    } else {
      const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
      std::memcpy(p, esc, 6);
      p += 6;
    }
  }
  *p++ = '"';
  out.advance_to(p);
}

// A string as JSON, the escapes as append_json_string writes them; false
// (and nothing written) when it is not UTF-8, as every Avro string must be.
bool put_json_string(JsonOut& out, const char* s, size_t n) {
  constexpr size_t kLong = 4096;  // beyond, six bytes of room per byte is too many
  if (n > kLong) {
    if (!is_valid_utf8(std::string_view(s, n))) return false;
    append_json_string(out.string(), std::string_view(s, n));
    out.resume();
    return true;
  }
  static constexpr auto kEscape = [] {
    std::array<char, 256> t{};  // 0: as it is; 'u': \u00XX; else the short escape
    for (int c = 0; c < 0x20; ++c) t[static_cast<size_t>(c)] = 'u';
    t['\b'] = 'b';
    t['\f'] = 'f';
    t['\n'] = 'n';
    t['\r'] = 'r';
    t['\t'] = 't';
    t['"'] = '"';
    t['\\'] = '\\';
    return t;
  }();
  static constexpr char kHex[] = "0123456789abcdef";
  char* const begin = out.room(n * 6 + 2);
  char* p = begin;
  *p++ = '"';
  unsigned any = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    any |= c;
    const char e = kEscape[c];
    if (e == 0) {
      *p++ = static_cast<char>(c);
    } else if (e != 'u') {
      *p++ = '\\';
      *p++ = e;
    } else {
      const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
      std::memcpy(p, esc, 6);
      p += 6;
    }
  }
  *p++ = '"';
  if ((any & 0x80) && !is_valid_utf8(std::string_view(s, n))) return false;
  out.advance_to(p);
  return true;
}

// The first number of a valid JSON text that simdjson's DOM cannot hold:
// an integer beyond 64 bits, or beyond a double's range (1e400). Its text,
// for a message that names the number as the user wrote it.
std::string_view unreadable_number(std::string_view json) {
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '"') {
      for (++i; i < json.size() && json[i] != '"'; ++i)
        if (json[i] == '\\') ++i;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    size_t end = i;
    while (end < json.size() &&
           std::string_view("0123456789+-.eE").find(json[end]) != std::string_view::npos)
      ++end;
    const std::string_view number = json.substr(i, end - i);
    i = end - 1;
    if (number.find_first_of(".eE") == std::string_view::npos) {
      int64_t x = 0;
      uint64_t u = 0;
      const char* last = number.data() + number.size();
      if (std::from_chars(number.data(), last, x).ec == std::errc() ||
          std::from_chars(number.data(), last, u).ec == std::errc())
        continue;
      return number;
    }
    if (std::isinf(std::strtod(std::string(number).c_str(), nullptr))) return number;
  }
  return {};
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

JsonType json_type(dom::element e) {
  switch (e.type()) {
    case dom::element_type::ARRAY:
      return JsonType::kArray;
    case dom::element_type::OBJECT:
      return JsonType::kObject;
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
    case dom::element_type::DOUBLE:
      return JsonType::kNumber;
    case dom::element_type::STRING:
      return JsonType::kString;
    case dom::element_type::BOOL:
      return JsonType::kBool;
    case dom::element_type::NULL_VALUE:
      return JsonType::kNull;
  }
  return JsonType::kMissing;
}

// A value quoted for a message, cut short.
std::string quoted(std::string_view text) {
  constexpr size_t kShown = 40;
  std::string out = "'";
  size_t n = std::min(text.size(), kShown);
  while (n < text.size() && n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      out.append(fmt::format("\\x{:02x}", c));
      continue;
    }
    out.push_back(text[i]);
  }
  if (n < text.size()) out.append("...");
  out.push_back('\'');
  return out;
}

// One step of a path from the value's root, for messages.
struct PathStep {
  std::string_view key;
  size_t index = 0;
  bool is_index = false;
};

std::string format_path(const PathStep* steps, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const PathStep& s = steps[i];
    if (s.is_index) {
      out.append(fmt::format("[{}]", s.index));
      continue;
    }
    append_path_key(out, s.key);
  }
  // Relative to the value, as messages name fields: items[2].price.
  if (!out.empty() && out[0] == '.') out.erase(0, 1);
  return out;
}

// libavro's memory reader counts what it has read but has no call that
// tells (avro_reader_is_eof answers only for files), and the payload must
// be read to its end. This mirrors the reader's struct (io.c, 1.11), which
// is trusted only once a reader of known state has been seen through it.
struct MemoryReaderMirror {
  int type;  // struct avro_reader_t_
  int refcount;
  const char* buf;
  int64_t len;
  int64_t read;
};

MemoryReaderMirror peek(avro_reader_t reader) {
  MemoryReaderMirror m;
  std::memcpy(&m, reader, sizeof m);
  return m;
}

bool mirror_fits() {
  static const char kBytes[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  avro_reader_t r = avro_reader_memory(kBytes, 11);
  if (r == nullptr) return false;
  char got[4];
  bool fits = avro_read(r, got, 3) == 0;
  MemoryReaderMirror m = peek(r);
  fits = fits && m.buf == kBytes && m.len == 11 && m.read == 3;
  avro_reader_memory_set_source(r, kBytes + 2, 9);
  fits = fits && avro_read(r, got, 2) == 0;
  m = peek(r);
  fits = fits && m.buf == kBytes + 2 && m.len == 9 && m.read == 2;
  avro_reader_free(r);
  return fits;
}

// libavro allocates, for every string it reads, the string and a wrapper
// of it, and frees the previous record's two: four calls of the C
// allocator per string field, a tenth of the time decoding takes. Its
// allocator hook keeps small blocks here for reuse instead, per thread
// (the hook is the process's; any thread may call libavro). Each block is
// still malloc's own, sized by malloc_usable_size, so blocks allocated
// before the hook was set, or freed with free(), mix in safely.
struct BlockLists {
  static constexpr size_t kGrain = 16;
  static constexpr size_t kClasses = 16;  // blocks of up to 256 bytes
  static constexpr uint32_t kKept = 1024;
  struct Block {
    Block* next;
  };
  Block* lists[kClasses + 1];
  uint32_t counts[kClasses + 1];
  bool closed;      // the thread is ending: malloc and free only
  bool registered;  // BlockListsCloser will free the lists
};
// Trivially destructible, so that it outlives every other thread_local
// and static whose destructor may still free through libavro.
thread_local BlockLists tls_blocks{};

struct BlockListsCloser {
  ~BlockListsCloser() {
    tls_blocks.closed = true;
    for (auto* list : tls_blocks.lists)
      while (list != nullptr) {
        auto* next = list->next;
        std::free(list);
        list = next;
      }
  }
};
thread_local BlockListsCloser tls_blocks_closer;

void* take_block(size_t size) {
  const size_t c = (size + BlockLists::kGrain - 1) / BlockLists::kGrain;
  BlockLists& b = tls_blocks;
  if (c > BlockLists::kClasses || b.closed) return std::malloc(size);
  if (BlockLists::Block* block = b.lists[c]) {
    b.lists[c] = block->next;
    --b.counts[c];
    return block;
  }
  return std::malloc(c * BlockLists::kGrain);
}

void give_block(void* p) {
  const size_t usable = malloc_usable_size(p);
  const size_t c = usable / BlockLists::kGrain;
  BlockLists& b = tls_blocks;
  if (c == 0 || c > BlockLists::kClasses || b.closed || b.counts[c] >= BlockLists::kKept) {
    std::free(p);
    return;
  }
  if (!b.registered) {
    b.registered = true;
    (void)&tls_blocks_closer;  // the first use in a thread registers its destructor
  }
  auto* block = static_cast<BlockLists::Block*>(p);
  block->next = b.lists[c];
  b.lists[c] = block;
  ++b.counts[c];
}

// While a payload is read, no block libavro asks for may be larger than
// this: a hostile length (a string said to hold a gigabyte, in a payload of
// ten bytes) or count fails the read, instead of the process or its memory
// (libavro 1.11 leaks a string buffer whose bytes then run short).
thread_local size_t tls_read_limit = SIZE_MAX;

void* avro_allocate(void*, void* ptr, size_t, size_t size) {
  if (size == 0) {
    if (ptr != nullptr) give_block(ptr);
    return nullptr;
  }
  if (size > tls_read_limit) return nullptr;
  if (ptr == nullptr) return take_block(size);
  const size_t usable = malloc_usable_size(ptr);
  if (size <= usable) return ptr;
  constexpr size_t kLargest = BlockLists::kClasses * BlockLists::kGrain;
  if (usable > kLargest) return std::realloc(ptr, size);
  void* moved = take_block(size);
  if (moved == nullptr) return nullptr;
  std::memcpy(moved, ptr, usable);
  give_block(ptr);
  return moved;
}

// --- the codec ---------------------------------------------------------------

class AvroCodec final : public ValueCodec {
 public:
  AvroCodec(SchemaRegistry& registry, const DecodeOptions& options)
      : registry_(registry), options_(options) {
    reader_ = avro_reader_memory("", 0);
    writer_ = avro_writer_memory("", 0);
    static const bool kMirrorFits = mirror_fits();
    mirror_fits_ = kMirrorFits;
  }
  ~AvroCodec() override {
    // The compiled schemas' values go before the reader and writer.
    cache_.clear();
    if (reader_ != nullptr) avro_reader_free(reader_);
    if (writer_ != nullptr) avro_writer_free(writer_);
  }

  Expected<int32_t> decode(std::string_view bytes, std::string& out) override;
  Status encode(std::string_view json, int32_t schema_id, std::string& out) override;

 private:
  Expected<Compiled*> schema(int32_t id);
  // How much of the payload the reader has read.
  size_t bytes_read();

  // Decoding: the value to JSON. False on a value that JSON cannot take;
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

  // Encoding: JSON to the value.
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
  Status avro_fault(const char* what) {
    return field_error(fmt::format("libavro cannot {}: {}", what, avro_strerror()));
  }
  Error field_error(std::string_view why) const {
    if (path_.empty()) return data_error("avro: {}", why);
    return data_error("avro: field '{}': {}", format_path(path_.data(), path_.size()), why);
  }
  Error mismatch(const char* expected, dom::element e) const {
    return field_error(
        fmt::format("expected {}, found {}", expected, json_type_phrase(json_type(e))));
  }
  int rank(const Compiled& c, uint32_t branch, dom::element e);

  SchemaRegistry& registry_;
  DecodeOptions options_;
  std::unordered_map<int32_t, std::unique_ptr<Compiled>> cache_;
  Compiled* last_ = nullptr;  // the last id's schema: records mostly share one
  avro_reader_t reader_ = nullptr;
  avro_writer_t writer_ = nullptr;
  bool mirror_fits_ = false;
  int64_t payload_size_ = 0;

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

Expected<Compiled*> AvroCodec::schema(int32_t id) {
  if (last_ != nullptr && last_->id == id) return last_;
  auto it = cache_.find(id);
  if (it != cache_.end()) {
    last_ = it->second.get();
    return last_;
  }
  auto registered = registry_.by_id(id);
  if (!registered) return registered.take_error();
  if (registered->type != SchemaType::kAvro)
    return data_error("avro: schema {} is a {} schema, not an Avro one", id,
                      schema_type_name(registered->type));
  if (!registered->references.empty())
    return data_error("avro: schema {} refers to other subjects' schemas, which is not supported",
                      id);
  registered->id = id;
  auto compiled = compile(*registered);
  if (!compiled) return data_error("avro: schema {}: {}", id, compiled.error().message);
  last_ = compiled->get();
  cache_[id] = std::move(*compiled);
  return last_;
}

// --- decoding ----------------------------------------------------------------

size_t AvroCodec::bytes_read() {
  if (mirror_fits_) return static_cast<size_t>(peek(reader_).read);
  // Without the mirror: a byte at a time until none is left (the slow way,
  // and only what a payload holds beyond its value).
  int64_t left = 0;
  char byte;
  while (avro_read(reader_, &byte, 1) == 0) ++left;
  return static_cast<size_t>(payload_size_ - left);
}

Expected<int32_t> AvroCodec::decode(std::string_view bytes, std::string& out) {
  auto framed = unframe(bytes);
  if (!framed) return framed.take_error();
  const int32_t id = framed->schema_id;
  auto found = schema(id);
  if (!found) return found.take_error();
  Compiled& c = **found;
  const std::string_view payload = framed->payload;
  payload_size_ = static_cast<int64_t>(payload.size());
  avro_reader_memory_set_source(reader_, payload.data(), payload_size_);
  // A decoded value takes more memory than its encoding, but not this much
  // more; a payload that asks for it lies about a length or a count.
  tls_read_limit = std::max<size_t>(payload.size() * 64, size_t{1} << 20);
  int rc = avro_value_read(reader_, &c.value);
  tls_read_limit = SIZE_MAX;
  if (rc != 0) {
    if (rc == ENOSPC) return data_error("avro: payload of schema {} is truncated", id);
    if (rc == ENOMEM)
      return data_error(
          "avro: payload of schema {} declares a string, bytes or array longer than it can "
          "hold",
          id);
    return data_error("avro: payload of schema {} cannot be read: {}", id, avro_strerror());
  }
  const size_t left = payload.size() - bytes_read();
  if (left > 0) return data_error("avro: {} bytes left after the value of schema {}", left, id);
  const size_t at = out.size();
  decode_path_.clear();
  JsonOut json(out);
  const bool written = c.fixed.empty()
                           ? write(c, c.root, &c.value, json)
                           : write_record(c, c.nodes[c.root], &c.value, &c.fixed[0], json);
  if (!written) {
    out.resize(at);
    std::reverse(decode_path_.begin(), decode_path_.end());
    if (decode_path_.empty()) return data_error("avro: schema {}: {}", id, decode_error_);
    return data_error("avro: field '{}' of schema {}: {}",
                      format_path(decode_path_.data(), decode_path_.size()), id, decode_error_);
  }
  json.finish();
  return id;
}

bool AvroCodec::write(const Compiled& c, uint32_t at, avro_value_t* v, JsonOut& out) {
  const Node& n = c.nodes[at];
  switch (n.kind) {
    case Kind::kNull:
      out.put("null", 4);
      return true;
    case Kind::kBoolean: {
      int b = 0;
      if (avro_value_get_boolean(v, &b)) return decode_fault("not a boolean");
      if (b)
        out.put("true", 4);
      else
        out.put("false", 5);
      return true;
    }
    case Kind::kInt: {
      int32_t x = 0;
      if (avro_value_get_int(v, &x)) return decode_fault("not an int");
      if (n.logical == Logical::kNone || options_.avro_standard_json) {
        put_int(out, x);
        return true;
      }
      write_int(n, x, out);
      return true;
    }
    case Kind::kLong: {
      int64_t x = 0;
      if (avro_value_get_long(v, &x)) return decode_fault("not a long");
      if (n.logical == Logical::kNone || options_.avro_standard_json) {
        put_int(out, x);
        return true;
      }
      write_long(n, x, out);
      return true;
    }
    case Kind::kFloat: {
      float x = 0;
      if (avro_value_get_float(v, &x)) return decode_fault("not a float");
      put_float(out, x);
      return true;
    }
    case Kind::kDouble: {
      double x = 0;
      if (avro_value_get_double(v, &x)) return decode_fault("not a double");
      if (put_non_finite(out, x) || put_short_decimal(out, x)) return true;
      scratch_.clear();
      append_double(scratch_, x);
      out.put(scratch_);
      return true;
    }
    case Kind::kString: {
      const char* p = nullptr;
      size_t size = 0;
      if (avro_value_get_string(v, &p, &size)) return decode_fault("not a string");
      // The size counts a NUL.
      if (!put_json_string(out, p, size == 0 ? 0 : size - 1))
        return decode_fault("a string that is not valid UTF-8");
      return true;
    }
    case Kind::kBytes:
    case Kind::kFixed: {
      const void* p = nullptr;
      size_t size = 0;
      if ((n.kind == Kind::kBytes ? avro_value_get_bytes(v, &p, &size)
                                  : avro_value_get_fixed(v, &p, &size)))
        return decode_fault("not bytes");
      const auto* b = static_cast<const unsigned char*>(p);
      if (options_.avro_standard_json) {
        put_code_points(out, b, size);
        return true;
      }
      if (n.logical == Logical::kDecimal) {
        write_decimal(out, b, size, n.scale);
        return true;
      }
      out.put('"');
      append_base64(out.string(), std::string_view(static_cast<const char*>(p), size));
      out.resume();
      out.put('"');
      return true;
    }
    case Kind::kEnum: {
      int x = 0;
      if (avro_value_get_enum(v, &x)) return decode_fault("not an enum");
      if (x < 0 || static_cast<size_t>(x) >= n.symbol_json.size())
        return decode_fault("an enum index beyond the symbols");
      n.symbol_json[static_cast<size_t>(x)].put(out);
      return true;
    }
    case Kind::kRecord:
      return write_record(c, n, v, nullptr, out);
    case Kind::kArray: {
      size_t count = 0;
      if (avro_value_get_size(v, &count)) return decode_fault("not an array");
      out.put('[');
      for (size_t i = 0; i < count; ++i) {
        if (i > 0) out.put(',');
        avro_value_t child;
        if (avro_value_get_by_index(v, i, &child, nullptr)) return decode_fault("a missing item");
        if (!write(c, n.children[0], &child, out)) {
          decode_path_.push_back({{}, i, true});
          return false;
        }
      }
      out.put(']');
      return true;
    }
    case Kind::kMap: {
      size_t count = 0;
      if (avro_value_get_size(v, &count)) return decode_fault("not a map");
      out.put('{');
      for (size_t i = 0; i < count; ++i) {
        if (i > 0) out.put(',');
        avro_value_t child;
        const char* key = nullptr;
        if (avro_value_get_by_index(v, i, &child, &key)) return decode_fault("a missing entry");
        std::string_view k(key);
        if (!put_json_string(out, k.data(), k.size()))
          return decode_fault("a map key that is not valid UTF-8");
        out.put(':');
        if (!write(c, n.children[0], &child, out)) {
          decode_path_.push_back({k, 0, false});
          return false;
        }
      }
      out.put('}');
      return true;
    }
    case Kind::kUnion: {
      int d = 0;
      avro_value_t branch;
      if (avro_value_get_discriminant(v, &d) || avro_value_get_current_branch(v, &branch))
        return decode_fault("a union without a branch");
      const uint32_t b = n.children[static_cast<size_t>(d)];
      if (c.nodes[b].kind == Kind::kNull) {
        out.put("null", 4);
        return true;
      }
      if (!options_.avro_standard_json) return write(c, b, &branch, out);
      c.nodes[b].wrap.put(out);
      if (!write(c, b, &branch, out)) return false;
      out.put('}');
      return true;
    }
  }
  return decode_fault("an unknown type");
}

bool AvroCodec::write_record(const Compiled& c, const Node& n, avro_value_t* v,
                             const FixedRecord* fixed, JsonOut& out) {
  out.put('{');
  for (size_t i = 0; i < n.fields.size(); ++i) {
    const Field& f = n.fields[i];
    f.key.put(out);
    avro_value_t child;
    bool ok;
    if (fixed != nullptr) {
      child = fixed->fields[i];
      const int32_t nested = fixed->nested[i];
      ok = nested >= 0 ? write_record(c, c.nodes[f.type], &child,
                                      &c.fixed[static_cast<size_t>(nested)], out)
                       : write(c, f.type, &child, out);
    } else {
      if (avro_value_get_by_index(v, i, &child, nullptr)) return decode_fault("a missing field");
      ok = write(c, f.type, &child, out);
    }
    if (!ok) {
      decode_path_.push_back({f.name, 0, false});
      return false;
    }
  }
  out.put('}');
  return true;
}

// hh:mm:ss and the fraction's digits, quoted.
void put_time_of_day(JsonOut& out, int64_t ms, uint64_t fraction, int fraction_digits) {
  char* p = out.room(24);
  *p++ = '"';
  p = write_digits(p, static_cast<uint64_t>(ms / kHour), 2);
  *p++ = ':';
  p = write_digits(p, static_cast<uint64_t>(ms / kMinute % 60), 2);
  *p++ = ':';
  p = write_digits(p, static_cast<uint64_t>(ms / kSecond % 60), 2);
  *p++ = '.';
  p = write_digits(p, fraction, fraction_digits);
  *p++ = '"';
  out.advance_to(p);
}

void AvroCodec::write_int(const Node& n, int32_t v, JsonOut& out) {
  if (n.logical == Logical::kDate) {
    // Days outside the years 0000-9999 stay numbers, which encode() reads
    // back.
    const Millis t = static_cast<Millis>(v) * kDay;
    if (t < kMinTime || t > kMaxTime) return put_int(out, v);
    scratch_.clear();
    append_rfc3339(scratch_, t);
    out.put('"');
    out.put(scratch_.data(), 10);  // yyyy-mm-dd
    out.put('"');
    return;
  }
  // time-millis: within a day, else the number.
  if (v < 0 || v >= kDay) return put_int(out, v);
  put_time_of_day(out, v, static_cast<uint64_t>(v % 1000), 3);
}

void AvroCodec::write_long(const Node& n, int64_t v, JsonOut& out) {
  switch (n.logical) {
    case Logical::kTimestampMillis:
      return write_timestamp(out, v, false, false);
    case Logical::kTimestampMicros:
      return write_timestamp(out, v, true, false);
    case Logical::kLocalTimestampMillis:
      return write_timestamp(out, v, false, true);
    case Logical::kLocalTimestampMicros:
      return write_timestamp(out, v, true, true);
    case Logical::kTimeMicros:
      if (v < 0 || v >= kDay * 1000) return put_int(out, v);
      return put_time_of_day(out, v / 1000, static_cast<uint64_t>(v % 1'000'000), 6);
    default:
      return put_int(out, v);
  }
}

void AvroCodec::write_timestamp(JsonOut& out, int64_t v, bool micros, bool local) {
  const int64_t per_milli = micros ? 1000 : 1;
  const Millis ms = floor_div(v, per_milli);
  // Times RFC 3339 cannot write are numbers, as --time-format ms has them.
  if (options_.epoch_millis || ms < kMinTime || ms > kMaxTime)
    return put_scaled_millis(out, v, per_milli, 3);
  scratch_.clear();
  append_rfc3339(scratch_, ms);
  char* p = out.room(scratch_.size() + 8);
  *p++ = '"';
  std::memcpy(p, scratch_.data(), scratch_.size() - 1);  // without the Z
  p += scratch_.size() - 1;
  if (micros) p = write_digits(p, static_cast<uint64_t>(floor_mod(v, per_milli)), 3);
  if (!local) *p++ = 'Z';
  *p++ = '"';
  out.advance_to(p);
}

void AvroCodec::write_decimal(JsonOut& out, const unsigned char* b, size_t n, int32_t scale) {
  const bool negative = n > 0 && (b[0] & 0x80);
  digits_.clear();
  if (n <= 8) {
    uint64_t u = negative ? ~uint64_t{0} : 0;
    for (size_t i = 0; i < n; ++i) u = u << 8 | b[i];
    if (negative) u = 0 - u;
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, u);
    digits_.assign(buf, r.ptr);
  } else {
    // The magnitude, big-endian, divided by 10^9 until nothing is left.
    big_.assign(b, b + n);
    if (negative) {
      unsigned carry = 1;
      for (size_t i = n; i-- > 0;) {
        unsigned x = static_cast<unsigned char>(~big_[i]) + carry;
        big_[i] = static_cast<uint8_t>(x);
        carry = x >> 8;
      }
    }
    size_t start = 0;
    while (start < big_.size()) {
      if (big_[start] == 0) {
        ++start;
        continue;
      }
      uint64_t rem = 0;
      for (size_t i = start; i < big_.size(); ++i) {
        uint64_t cur = rem << 8 | big_[i];
        big_[i] = static_cast<uint8_t>(cur / 1'000'000'000);
        rem = cur % 1'000'000'000;
      }
      for (int k = 0; k < 9; ++k) {
        digits_.push_back(static_cast<char>('0' + rem % 10));
        rem /= 10;
      }
    }
    while (digits_.size() > 1 && digits_.back() == '0') digits_.pop_back();
    if (digits_.empty()) digits_.push_back('0');
    std::reverse(digits_.begin(), digits_.end());
  }
  const auto s = static_cast<size_t>(scale);
  const size_t len = digits_.size();
  char* p = out.room(len + s + 8);
  *p++ = '"';
  if (negative) *p++ = '-';
  if (s == 0) {
    p = std::copy(digits_.begin(), digits_.end(), p);
  } else if (len > s) {
    p = std::copy(digits_.begin(), digits_.end() - static_cast<std::ptrdiff_t>(s), p);
    *p++ = '.';
    p = std::copy(digits_.end() - static_cast<std::ptrdiff_t>(s), digits_.end(), p);
  } else {
    *p++ = '0';
    *p++ = '.';
    p = std::fill_n(p, s - len, '0');
    p = std::copy(digits_.begin(), digits_.end(), p);
  }
  *p++ = '"';
  out.advance_to(p);
}

// --- encoding ----------------------------------------------------------------

Status AvroCodec::encode(std::string_view json, int32_t schema_id, std::string& out) {
  auto found = schema(schema_id);
  if (!found) return found.take_error();
  Compiled& c = **found;
  padded_.assign(json);
  padded_.resize(json.size() + simdjson::SIMDJSON_PADDING);
  dom::element root;
  if (parser_.parse(padded_.data(), json.size(), false).get(root)) {
    if (!json_checker_) json_checker_ = std::make_unique<PayloadEncoder>();
    Status why = json_checker_->check(json);
    if (!why.ok()) return data_error("avro: {}", why.error().message);
    // Valid JSON that simdjson's DOM refuses holds a number it cannot.
    std::string_view number = unreadable_number(json);
    if (number.find_first_of(".eE") != std::string_view::npos)
      return data_error("avro: {} is beyond the range of a 64-bit float", number);
    if (!number.empty())
      return data_error("avro: {} is an integer beyond 64 bits: no Avro int or long holds it",
                        number);
    return data_error("avro: not valid JSON");
  }
  path_.clear();
  seen_.clear();
  if (avro_value_reset(&c.value)) return avro_fault("reset a value");
  KPIPE_TRY(build(c, c.root, root, &c.value, false));
  size_t size = 0;
  if (avro_value_sizeof(&c.value, &size)) return avro_fault("size the value");
  const size_t at = out.size();
  append_frame(out, schema_id);
  const size_t body = out.size();
  out.resize(body + size);
  avro_writer_memory_set_dest(writer_, out.data() + body, static_cast<int64_t>(size));
  if (avro_value_write(writer_, &c.value)) {
    out.resize(at);
    return avro_fault("write the value");
  }
  return {};
}

Status AvroCodec::build(const Compiled& c, uint32_t at, dom::element e, avro_value_t* v,
                        bool in_default) {
  const Node& n = c.nodes[at];
  // Avro's JSON encoding (and every default) writes bytes as code points.
  const bool raw = options_.avro_standard_json || in_default;
  switch (n.kind) {
    case Kind::kNull:
      if (!e.is_null()) return mismatch("null", e);
      if (avro_value_set_null(v)) return avro_fault("set null");
      return {};
    case Kind::kBoolean: {
      bool b = false;
      if (e.get(b)) return mismatch("a boolean", e);
      if (avro_value_set_boolean(v, b)) return avro_fault("set a boolean");
      return {};
    }
    case Kind::kInt:
      return build_int(n, e, v);
    case Kind::kLong:
      return build_long(n, e, v, raw);
    case Kind::kFloat:
    case Kind::kDouble:
      return build_real(n, e, v);
    case Kind::kString: {
      std::string_view s;
      if (e.get(s)) return mismatch("a string", e);
      // simdjson's strings end with a NUL, which libavro counts in the size.
      if (avro_value_set_string_len(v, s.data(), s.size() + 1)) return avro_fault("set a string");
      return {};
    }
    case Kind::kBytes:
    case Kind::kFixed:
      return build_bytes(n, e, v, raw);
    case Kind::kEnum: {
      std::string_view s;
      if (e.get(s)) return mismatch(fmt::format("a symbol of enum {}", n.short_name).c_str(), e);
      for (size_t i = 0; i < n.symbols.size(); ++i) {
        if (n.symbols[i] != s) continue;
        if (avro_value_set_enum(v, static_cast<int>(i))) return avro_fault("set an enum");
        return {};
      }
      return field_error(fmt::format("{} is not a symbol of enum {}", quoted(s), n.short_name));
    }
    case Kind::kArray: {
      dom::array a;
      if (e.get(a)) return mismatch("an array", e);
      size_t i = 0;
      for (dom::element item : a) {
        avro_value_t child;
        if (avro_value_append(v, &child, nullptr)) return avro_fault("append to an array");
        path_.push_back({{}, i++, true});
        KPIPE_TRY(build(c, n.children[0], item, &child, in_default));
        path_.pop_back();
      }
      return {};
    }
    case Kind::kMap: {
      dom::object o;
      if (e.get(o)) return mismatch("an object", e);
      for (auto it = o.begin(); it != o.end(); ++it) {
        std::string_view key = it.key();
        path_.push_back({key, 0, false});
        if (key.find('\0') != std::string_view::npos)
          return field_error("a map key with a NUL character");
        avro_value_t child;
        int is_new = 0;
        if (avro_value_add(v, it.key_c_str(), &child, nullptr, &is_new))
          return avro_fault("add to a map");
        if (!is_new) return field_error("appears twice");
        KPIPE_TRY(build(c, n.children[0], it.value(), &child, in_default));
        path_.pop_back();
      }
      return {};
    }
    case Kind::kRecord:
      return build_record(c, n, e, v, in_default);
    case Kind::kUnion:
      return build_union(c, n, e, v, in_default);
  }
  return field_error("an unknown type");
}

Status AvroCodec::build_record(const Compiled& c, const Node& n, dom::element e, avro_value_t* v,
                               bool in_default) {
  dom::object o;
  if (e.get(o)) return mismatch(fmt::format("an object (record {})", n.short_name).c_str(), e);
  const size_t base = seen_.size();
  const size_t count = n.fields.size();
  seen_.resize(base + count, 0);
  size_t hint = 0;  // JSON written from a record has its fields in order
  for (auto [key, value] : o) {
    size_t i = hint < count && n.fields[hint].name == key ? hint : count;
    for (size_t k = 0; i == count && k < count; ++k)
      if (n.fields[k].name == key) i = k;
    path_.push_back({key, 0, false});
    if (i == count) return field_error(fmt::format("not a field of record {}", n.short_name));
    if (seen_[base + i]) return field_error("appears twice");
    seen_[base + i] = 1;
    hint = i + 1;
    avro_value_t child;
    if (avro_value_get_by_index(v, i, &child, nullptr)) return avro_fault("get a field");
    KPIPE_TRY(build(c, n.fields[i].type, value, &child, in_default));
    path_.pop_back();
  }
  for (size_t i = 0; i < count; ++i) {
    if (seen_[base + i]) continue;
    const Field& f = n.fields[i];
    path_.push_back({f.name, 0, false});
    if (!f.has_default) return field_error("missing, and it has no default");
    avro_value_t child;
    if (avro_value_get_by_index(v, i, &child, nullptr)) return avro_fault("get a field");
    KPIPE_TRY(build(c, f.type, f.default_value, &child, true));
    path_.pop_back();
  }
  seen_.resize(base);
  return {};
}

// How well a union's branch suits a JSON value: 0 not at all, then 1 (the
// first choice) upwards, so that plain JSON picks the branch it means.
int AvroCodec::rank(const Compiled& c, uint32_t branch, dom::element e) {
  const Node& b = c.nodes[branch];
  switch (e.type()) {
    case dom::element_type::NULL_VALUE:
      return b.kind == Kind::kNull ? 1 : 0;
    case dom::element_type::BOOL:
      return b.kind == Kind::kBoolean ? 1 : 0;
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
      if (b.kind == Kind::kInt || b.kind == Kind::kLong) return 1;
      if (b.kind == Kind::kFloat || b.kind == Kind::kDouble) return 2;
      return b.logical == Logical::kDecimal ? 3 : 0;
    case dom::element_type::DOUBLE:
      if (b.kind == Kind::kFloat || b.kind == Kind::kDouble) return 1;
      if (b.logical == Logical::kDecimal) return 2;
      // Microseconds as fractional milliseconds (epoch_millis).
      if (b.logical == Logical::kTimestampMicros || b.logical == Logical::kLocalTimestampMicros)
        return 2;
      return 0;
    case dom::element_type::STRING:
      switch (b.kind) {
        case Kind::kString:
          return 1;
        case Kind::kEnum:
          return 2;
        case Kind::kBytes:
        case Kind::kFixed:
        case Kind::kFloat:
        case Kind::kDouble:
          return 3;
        case Kind::kInt:
        case Kind::kLong:
          return b.logical != Logical::kNone ? 3 : 0;
        default:
          return 0;
      }
    case dom::element_type::ARRAY:
      return b.kind == Kind::kArray ? 1 : 0;
    case dom::element_type::OBJECT: {
      if (b.kind == Kind::kMap) return 2;
      if (b.kind != Kind::kRecord) return 0;
      dom::object o = e.get_object().value_unsafe();
      for (const Field& f : b.fields) {
        dom::element ignored;
        if (!f.has_default && o[f.name].get(ignored)) return 4;
      }
      for (auto [key, value] : o) {
        bool known = false;
        for (const Field& f : b.fields) known = known || f.name == key;
        if (!known) return 3;
      }
      return 1;
    }
  }
  return 0;
}

Status AvroCodec::build_union(const Compiled& c, const Node& n, dom::element e, avro_value_t* v,
                              bool in_default) {
  auto take = [&](size_t i, dom::element value) -> Status {
    avro_value_t branch;
    if (avro_value_set_branch(v, static_cast<int>(i), &branch))
      return avro_fault("set a union's branch");
    return build(c, n.children[i], value, &branch, in_default);
  };
  // A default is of the first branch (the specification, before 1.12).
  if (in_default) return take(0, e);
  // Avro's JSON encoding: {"type name": value}.
  dom::object o;
  if (!e.get(o) && o.size() == 1) {
    auto [key, value] = *o.begin();
    for (size_t i = 0; i < n.children.size(); ++i) {
      const Node& b = c.nodes[n.children[i]];
      if (b.branch_name == key || (is_named(b.kind) && b.short_name == key)) return take(i, value);
    }
  }
  // Plain JSON: the branch its type suits best, trying the next on failure
  // (an int branch and a number too large for it, a string that is no
  // symbol of an enum but a time).
  const size_t first = candidates_.size();
  for (size_t i = 0; i < n.children.size(); ++i)
    if (int r = rank(c, n.children[i], e); r > 0)
      candidates_.emplace_back(r, static_cast<uint32_t>(i));
  std::stable_sort(candidates_.begin() + static_cast<std::ptrdiff_t>(first), candidates_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t last = candidates_.size();
  const size_t depth = path_.size();
  const size_t seen = seen_.size();
  Status first_error;
  for (size_t k = first; k < last; ++k) {
    Status s = take(candidates_[k].second, e);
    if (s.ok()) {
      candidates_.resize(first);
      return s;
    }
    if (first_error.ok()) first_error = std::move(s);
    path_.resize(depth);
    seen_.resize(seen);
  }
  candidates_.resize(first);
  if (!first_error.ok()) return first_error;
  std::string names;
  for (uint32_t b : n.children) {
    if (!names.empty()) names.append(", ");
    names.append(c.nodes[b].branch_name);
  }
  return field_error(
      fmt::format("{} fits no branch of the union [{}]", json_type_phrase(json_type(e)), names));
}

// Reads "hh:mm:ss" with any fraction, floored to 1/per_second; -1 if it is
// not such a time of day.
int64_t parse_time_of_day(std::string_view s, int64_t per_second) {
  auto two = [&](size_t at, int max) -> int {
    if (at + 2 > s.size() || !is_digit(s[at]) || !is_digit(s[at + 1])) return -1;
    int v = (s[at] - '0') * 10 + (s[at + 1] - '0');
    return v > max ? -1 : v;
  };
  int h = two(0, 23), m = s.size() > 2 && s[2] == ':' ? two(3, 59) : -1,
      sec = s.size() > 5 && s[5] == ':' ? two(6, 59) : -1;
  if (h < 0 || m < 0 || sec < 0) return -1;
  int64_t v = ((h * 60 + m) * 60 + sec) * per_second;
  if (s.size() == 8) return v;
  if (s[8] != '.' || s.size() == 9) return -1;
  int64_t unit = per_second;
  for (size_t i = 9; i < s.size(); ++i) {
    if (!is_digit(s[i])) return -1;
    unit /= 10;
    v += (s[i] - '0') * unit;
  }
  return v;
}

Status AvroCodec::build_int(const Node& n, dom::element e, avro_value_t* v) {
  int64_t x = 0;
  std::string_view s;
  if (!e.get(s)) {
    if (n.logical == Logical::kDate) {
      Expected<Millis> t = data_error("");
      if (s.size() == 10) {
        scratch_.assign(s);
        scratch_.append("T00:00:00Z");
        t = parse_rfc3339(scratch_);
      }
      if (!t) return field_error(fmt::format("{} is not a date (yyyy-mm-dd)", quoted(s)));
      x = *t / kDay;
    } else if (n.logical == Logical::kTimeMillis) {
      x = parse_time_of_day(s, 1000);
      if (x < 0)
        return field_error(fmt::format("{} is not a time of day (hh:mm:ss.sss)", quoted(s)));
    } else {
      return mismatch("an integer", e);
    }
  } else if (e.get(x)) {
    // Between 2^63 and 2^64 the number is exact as an unsigned integer:
    // named as written, not as the double it would round to.
    if (uint64_t u = 0; !e.get(u)) return field_error(fmt::format("{} does not fit an int", u));
    double d = 0;
    if (e.get(d)) return mismatch("an integer", e);
    if (d != std::trunc(d)) return field_error(fmt::format("{} is not an integer", d));
    if (!(std::fabs(d) <= 9e15)) return field_error(fmt::format("{} does not fit an int", d));
    x = static_cast<int64_t>(d);
  }
  if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
    return field_error(fmt::format("{} does not fit an int", x));
  if (avro_value_set_int(v, static_cast<int32_t>(x))) return avro_fault("set an int");
  return {};
}

Status AvroCodec::build_long(const Node& n, dom::element e, avro_value_t* v, bool raw) {
  const bool micros =
      n.logical == Logical::kTimestampMicros || n.logical == Logical::kLocalTimestampMicros;
  const bool timestamp = micros || n.logical == Logical::kTimestampMillis ||
                         n.logical == Logical::kLocalTimestampMillis;
  const bool local =
      n.logical == Logical::kLocalTimestampMillis || n.logical == Logical::kLocalTimestampMicros;
  int64_t x = 0;
  std::string_view s;
  if (!e.get(s)) {
    if (timestamp) {
      auto t = parse_rfc3339(s);
      if (!t && local) {
        // Local times are written without an offset.
        scratch_.assign(s);
        scratch_.push_back('Z');
        auto bare = parse_rfc3339(scratch_);
        if (bare) t = bare;
      }
      if (!t) return field_error(t.error().message);
      x = *t;
      if (micros) {
        // parse_rfc3339 floors to the millisecond; the next three digits.
        int64_t sub = 0;
        if (s.size() > 19 && s[19] == '.') {
          size_t end = 20;
          while (end < s.size() && is_digit(s[end])) ++end;
          for (size_t i = 23; i < 26; ++i) sub = sub * 10 + (i < end ? s[i] - '0' : 0);
        }
        if (__builtin_mul_overflow(x, 1000, &x) || __builtin_add_overflow(x, sub, &x))
          return field_error(fmt::format("{} is out of range", quoted(s)));
      }
    } else if (n.logical == Logical::kTimeMicros) {
      x = parse_time_of_day(s, 1'000'000);
      if (x < 0)
        return field_error(fmt::format("{} is not a time of day (hh:mm:ss.ssssss)", quoted(s)));
    } else {
      return mismatch("an integer", e);
    }
  } else if (!e.get(x)) {
    // Plain JSON has epoch milliseconds for every timestamp
    // (DecodeOptions::epoch_millis); Avro's JSON the long itself.
    if (micros && !raw && __builtin_mul_overflow(x, 1000, &x))
      return field_error(fmt::format("{} ms is out of range", x));
  } else if (uint64_t u = 0; !e.get(u)) {
    // Beyond 2^63 and exact: named as written, not as a rounded double.
    if (micros && !raw) return field_error(fmt::format("{} ms is out of range", u));
    return field_error(fmt::format("{} does not fit a long", u));
  } else {
    double d = 0;
    if (e.get(d)) return mismatch("an integer", e);
    const bool scaled = micros && !raw;
    if (scaled) d *= 1000;
    if (d != std::trunc(d) && !scaled) return field_error(fmt::format("{} is not an integer", d));
    if (!(std::fabs(d) < 9.2e18)) return field_error(fmt::format("{} does not fit a long", d));
    x = scaled ? std::llround(d) : static_cast<int64_t>(d);
  }
  if (avro_value_set_long(v, x)) return avro_fault("set a long");
  return {};
}

Status AvroCodec::build_real(const Node& n, dom::element e, avro_value_t* v) {
  double d = 0;
  std::string_view s;
  if (!e.get(s)) {
    if (s == "NaN")
      d = std::numeric_limits<double>::quiet_NaN();
    else if (s == "Infinity")
      d = std::numeric_limits<double>::infinity();
    else if (s == "-Infinity")
      d = -std::numeric_limits<double>::infinity();
    else
      return field_error(fmt::format("expected a number, found the string {}", quoted(s)));
  } else if (e.get(d)) {
    return mismatch("a number", e);
  }
  if (n.kind == Kind::kDouble) {
    if (avro_value_set_double(v, d)) return avro_fault("set a double");
    return {};
  }
  // Beyond the largest float by half a step or more would round to infinity.
  if (std::isfinite(d) && std::fabs(d) >= 0x1.ffffffp127)
    return field_error(fmt::format("{} does not fit a float", d));
  if (avro_value_set_float(v, static_cast<float>(d))) return avro_fault("set a float");
  return {};
}

Status AvroCodec::build_bytes(const Node& n, dom::element e, avro_value_t* v, bool raw) {
  std::string_view s;
  const bool is_string = !e.get(s);
  if (n.logical == Logical::kDecimal && !(raw && is_string)) {
    if (is_string) return set_decimal(n, s, v);
    char buf[32];
    std::to_chars_result r{};
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    if (!e.get(i))
      r = std::to_chars(buf, buf + sizeof buf, i);
    else if (!e.get(u))
      r = std::to_chars(buf, buf + sizeof buf, u);
    else if (!e.get(d))
      r = std::to_chars(buf, buf + sizeof buf, d);
    else
      return mismatch("a decimal string or number", e);
    return set_decimal(n, std::string_view(buf, static_cast<size_t>(r.ptr - buf)), v);
  }
  if (!is_string) return mismatch(raw ? "a string of bytes" : "a base64 string", e);
  scratch_.clear();
  if (raw) {
    // Code points U+0000..U+00FF, one byte each.
    for (size_t i = 0; i < s.size(); ++i) {
      auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) {
        scratch_.push_back(static_cast<char>(c));
      } else if ((c == 0xC2 || c == 0xC3) && i + 1 < s.size()) {
        scratch_.push_back(static_cast<char>(((c & 0x03) << 6) | (s[++i] & 0x3F)));
      } else {
        return field_error("bytes as a string may only hold the code points U+0000 to U+00FF");
      }
    }
  } else {
    auto decoded = decode_base64(s);
    if (!decoded) return field_error(fmt::format("{} is not base64", quoted(s)));
    scratch_ = std::move(*decoded);
  }
  if (n.kind == Kind::kFixed) {
    if (static_cast<int64_t>(scratch_.size()) != n.size)
      return field_error(
          fmt::format("fixed {} holds {} bytes, found {}", n.short_name, n.size, scratch_.size()));
    if (avro_value_set_fixed(v, scratch_.data(), scratch_.size())) return avro_fault("set a fixed");
    return {};
  }
  if (avro_value_set_bytes(v, scratch_.data(), scratch_.size())) return avro_fault("set bytes");
  return {};
}

Status AvroCodec::set_decimal(const Node& n, std::string_view text, avro_value_t* v) {
  auto bad = [&](std::string_view why) {
    return field_error(
        fmt::format("{} is not a decimal({}, {}): {}", quoted(text), n.precision, n.scale, why));
  };
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  digits_.clear();
  size_t whole = 0, fraction = 0;
  for (; i < text.size() && is_digit(text[i]); ++i, ++whole) digits_.push_back(text[i]);
  if (i < text.size() && text[i] == '.')
    for (++i; i < text.size() && is_digit(text[i]); ++i, ++fraction) digits_.push_back(text[i]);
  if (whole + fraction == 0) return bad("no digits");
  int64_t exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool minus = false;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) minus = text[i++] == '-';
    size_t start = i;
    for (; i < text.size() && is_digit(text[i]) && exponent < 1'000'000; ++i)
      exponent = exponent * 10 + (text[i] - '0');
    if (i == start) return bad("no digits in the exponent");
    if (minus) exponent = -exponent;
  }
  if (i != text.size()) return bad("not a number");
  // digits_ * 10^(exponent - fraction), rescaled to the schema's scale.
  const int64_t shift = exponent - static_cast<int64_t>(fraction) + n.scale;
  if (shift < 0) {
    const auto drop = static_cast<size_t>(-shift);
    for (size_t k = 0; k < drop; ++k) {
      if (digits_.empty()) break;
      if (digits_.back() != '0')
        return bad(fmt::format("more than {} digits after the point", n.scale));
      digits_.pop_back();
    }
  } else {
    if (shift > n.precision) {
      // Zeros beyond the precision matter only if some digit is not zero.
      if (digits_.find_first_not_of('0') != std::string::npos)
        return bad(fmt::format("more than {} digits", n.precision));
      digits_.clear();
    } else {
      digits_.append(static_cast<size_t>(shift), '0');
    }
  }
  size_t lead = digits_.find_first_not_of('0');
  digits_.erase(0, lead == std::string::npos ? digits_.size() : lead);
  if (digits_.size() > static_cast<size_t>(n.precision))
    return bad(fmt::format("more than {} digits", n.precision));
  // The unscaled value in two's complement, little-endian, then the fewest
  // big-endian bytes that keep its sign (as Java's BigInteger writes it).
  big_.assign(1, 0);
  for (char d : digits_) {
    unsigned carry = static_cast<unsigned>(d - '0');
    for (uint8_t& byte : big_) {
      unsigned x = byte * 10u + carry;
      byte = static_cast<uint8_t>(x);
      carry = x >> 8;
    }
    if (carry) big_.push_back(static_cast<uint8_t>(carry));
  }
  big_.push_back(0);
  if (negative && !digits_.empty()) {
    unsigned carry = 1;
    for (uint8_t& byte : big_) {
      unsigned x = static_cast<uint8_t>(~byte) + carry;
      byte = static_cast<uint8_t>(x);
      carry = x >> 8;
    }
  }
  while (big_.size() > 1) {
    uint8_t top = big_.back(), next = big_[big_.size() - 2];
    if ((top == 0 && !(next & 0x80)) || (top == 0xFF && (next & 0x80)))
      big_.pop_back();
    else
      break;
  }
  if (n.kind == Kind::kFixed) {
    if (static_cast<int64_t>(big_.size()) > n.size)
      return bad(fmt::format("too large for fixed {}", n.short_name));
    big_.resize(static_cast<size_t>(n.size), (big_.back() & 0x80) ? 0xFF : 0);
  }
  std::reverse(big_.begin(), big_.end());
  if (n.kind == Kind::kFixed) {
    if (avro_value_set_fixed(v, big_.data(), big_.size())) return avro_fault("set a fixed");
    return {};
  }
  if (avro_value_set_bytes(v, big_.data(), big_.size())) return avro_fault("set bytes");
  return {};
}

}  // namespace

std::unique_ptr<ValueCodec> make_avro_codec(SchemaRegistry& registry,
                                            const DecodeOptions& options) {
  static const bool kHooked = [] {
    avro_set_allocator(avro_allocate, nullptr);
    return true;
  }();
  (void)kHooked;
  return std::make_unique<AvroCodec>(registry, options);
}

}  // namespace kpipe
