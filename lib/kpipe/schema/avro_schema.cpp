// The schema, as the Avro codec walks it.
//
// libavro 1.11 reads and writes the bytes but drops what a JSON mapping
// needs: logical types, defaults, the names that wrap union branches. So the
// schema's JSON is also read here into a table of nodes, one per type (a
// named type once, however often it is referenced), and checked to have the
// shape libavro gave it. Every decision that does not depend on the data
// (the kind, the logical type, the JSON text of keys and symbols) is made
// once, here, not per record.
#include "kpipe/schema/avro_internal.h"

#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kpipe::avro {

namespace {

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

// What opens a member named `name`, after `before`: a record field's key
// (`,"name":`), a wrapped union branch (`{"name":`).
Snippet member_opening(std::string before, std::string_view name) {
  append_json_string(before, name);
  before.push_back(':');
  return Snippet(std::move(before));
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
      out.key = member_opening(nodes_[at].fields.empty() ? "" : ",", name);
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

}  // namespace

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
  for (Node& n : c->nodes) n.wrap = member_opening("{", n.branch_name);
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

}  // namespace kpipe::avro
