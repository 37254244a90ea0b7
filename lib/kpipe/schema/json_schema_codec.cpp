#include "kpipe/schema/json_schema_codec.h"

#include <cmath>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kpipe/json.h"

namespace kpipe {

namespace {

// A small JSON Schema validator: the keywords that schemas written by hand
// or generated from classes mostly use, in the meaning they have in every
// draft from 4 to 2020-12:
//   type (a name or a list of them, "integer" for numbers without a
//   fraction), properties, required, additionalProperties (false or a
//   schema), items (a schema, or a list of schemas by position), enum,
//   const, minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers,
//   or draft 4's booleans), minLength, maxLength (in code points),
//   minItems, maxItems, allOf, anyOf, oneOf, boolean schemas, and $ref to
//   a JSON Pointer into the same schema ("#/definitions/...", "#/$defs/...").
// Every other keyword is ignored, and so accepts what it would have
// refused: pattern and format (no regular expressions here),
// patternProperties (and additionalProperties false beside it, which would
// otherwise refuse what the patterns allow), $ref to other documents, not,
// if/then/else, dependencies, uniqueItems, multipleOf. The registry checks
// compatibility; this check is there to catch a producer's mistakes early,
// with a message that names the field.

enum TypeBit : uint8_t {
  kNullBit = 1,
  kBooleanBit = 2,
  kObjectBit = 4,
  kArrayBit = 8,
  kNumberBit = 16,
  kStringBit = 32,
  kIntegerBit = 64,
};

struct Bound {
  double value = 0;
  std::string text;  // for messages
};

struct Node {
  bool refuse_all = false;  // the schema `false`
  uint8_t types = 0;        // 0: any
  std::string type_text;    // "integer or null"
  std::vector<std::pair<std::string, const Node*>> properties;
  std::vector<std::string> required;
  bool additional_refused = false;
  const Node* additional = nullptr;
  const Node* items = nullptr;
  std::vector<const Node*> item_list;
  const JsonValue* enum_values = nullptr;
  const JsonValue* const_value = nullptr;
  std::optional<Bound> minimum, maximum, exclusive_minimum, exclusive_maximum;
  std::optional<uint64_t> min_length, max_length, min_items, max_items;
  const Node* ref = nullptr;
  std::vector<const Node*> all_of, any_of, one_of;
};

// Deeper than this, a chain of $ref that consumes nothing is taken for a
// loop ({"$ref": "#"}).
constexpr int kMaxDepth = 1000;

void append_number(std::string& out, const JsonValue& v) {
  if (v.is_integer) {
    append_int(out, v.integer);
    return;
  }
  append_double(out, v.number);
}

std::string number_text(const JsonValue& v) {
  std::string s;
  append_number(s, v);
  return s;
}

void append_json(std::string& out, const JsonValue& v) {
  switch (v.type) {
    case JsonType::kNull:
    case JsonType::kMissing:
      out += "null";
      return;
    case JsonType::kBool:
      out += v.boolean ? "true" : "false";
      return;
    case JsonType::kNumber:
      append_number(out, v);
      return;
    case JsonType::kString:
      append_json_string(out, v.str);
      return;
    case JsonType::kArray:
      out.push_back('[');
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i > 0) out.push_back(',');
        append_json(out, v.items[i]);
      }
      out.push_back(']');
      return;
    case JsonType::kObject:
      out.push_back('{');
      for (size_t i = 0; i < v.members.size(); ++i) {
        if (i > 0) out.push_back(',');
        append_json_string(out, v.members[i].first);
        out.push_back(':');
        append_json(out, v.members[i].second);
      }
      out.push_back('}');
      return;
  }
}

std::string json_text(const JsonValue& v) {
  std::string s;
  append_json(s, v);
  return s;
}

bool is_integral(const JsonValue& v) {
  return v.type == JsonType::kNumber &&
         (v.is_integer || (std::isfinite(v.number) && v.number == std::floor(v.number)));
}

// JSON Schema's equality: numbers by value, objects whatever their order.
bool json_equal(const JsonValue& a, const JsonValue& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case JsonType::kBool:
      return a.boolean == b.boolean;
    case JsonType::kNumber:
      if (a.is_integer && b.is_integer) return a.integer == b.integer;
      return a.number == b.number;
    case JsonType::kString:
      return a.str == b.str;
    case JsonType::kArray:
      if (a.items.size() != b.items.size()) return false;
      for (size_t i = 0; i < a.items.size(); ++i)
        if (!json_equal(a.items[i], b.items[i])) return false;
      return true;
    case JsonType::kObject:
      if (a.members.size() != b.members.size()) return false;
      for (const auto& [key, value] : a.members) {
        const JsonValue* other = b.find(key);
        if (other == nullptr || !json_equal(value, *other)) return false;
      }
      return true;
    default:
      return true;
  }
}

const char* found_name(const JsonValue& v) {
  switch (v.type) {
    case JsonType::kNull:
      return "null";
    case JsonType::kBool:
      return "boolean";
    case JsonType::kNumber:
      return "number";
    case JsonType::kString:
      return "string";
    case JsonType::kArray:
      return "array";
    case JsonType::kObject:
      return "object";
    default:
      return "nothing";
  }
}

uint8_t type_bit(std::string_view name) {
  if (name == "null") return kNullBit;
  if (name == "boolean") return kBooleanBit;
  if (name == "object") return kObjectBit;
  if (name == "array") return kArrayBit;
  if (name == "number") return kNumberBit;
  if (name == "string") return kStringBit;
  if (name == "integer") return kIntegerBit;
  return 0;
}

bool has_type(uint8_t types, const JsonValue& v) {
  switch (v.type) {
    case JsonType::kNull:
      return types & kNullBit;
    case JsonType::kBool:
      return types & kBooleanBit;
    case JsonType::kObject:
      return types & kObjectBit;
    case JsonType::kArray:
      return types & kArrayBit;
    case JsonType::kString:
      return types & kStringBit;
    case JsonType::kNumber:
      return (types & kNumberBit) || ((types & kIntegerBit) && is_integral(v));
    default:
      return false;
  }
}

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

// "items[0].qty": a field path (kpipe(7), FIELD PATHS) relative to the
// value, as messages name fields.
void append_key(std::string& path, std::string_view key) {
  bool first = path.empty();
  append_path_key(path, key);
  if (first) path.erase(0, 1);
}

// A schema, compiled once per id from its JSON text, which it keeps
// (enum and const point into it).
class CompiledSchema {
 public:
  static Expected<std::unique_ptr<CompiledSchema>> compile(std::string_view text) {
    auto parsed = parse_json(text);
    if (!parsed) return parsed.take_error();
    auto schema = std::unique_ptr<CompiledSchema>(new CompiledSchema());
    schema->document_ = std::move(*parsed);
    auto root = schema->node(schema->document_);
    if (!root) return root.take_error();
    schema->root_ = *root;
    return schema;
  }

  Status validate(const JsonValue& value) const {
    std::string path;
    return check(*root_, value, path, 0);
  }

 private:
  CompiledSchema() = default;

  Expected<const Node*> node(const JsonValue& v) {
    if (auto it = compiled_.find(&v); it != compiled_.end()) return it->second;
    Node& n = nodes_.emplace_back();
    // Before the children, so that a $ref back to this schema finds it.
    compiled_.emplace(&v, &n);
    if (v.type == JsonType::kBool) {
      n.refuse_all = !v.boolean;
      return &n;
    }
    if (v.type != JsonType::kObject) return &n;  // not a schema: no constraint
    for (const auto& [key, value] : v.members) KPIPE_TRY(keyword(n, v, key, value));
    draft4_exclusive(v.find("exclusiveMinimum"), n.minimum, n.exclusive_minimum);
    draft4_exclusive(v.find("exclusiveMaximum"), n.maximum, n.exclusive_maximum);
    return &n;
  }

  Expected<std::vector<const Node*>> node_list(const JsonValue& list) {
    std::vector<const Node*> out;
    if (list.type != JsonType::kArray) return out;
    for (const JsonValue& item : list.items) {
      auto n = node(item);
      if (!n) return n.take_error();
      out.push_back(*n);
    }
    return out;
  }

  static std::optional<Bound> bound(const JsonValue& v) {
    if (v.type != JsonType::kNumber) return std::nullopt;
    return Bound{v.number, number_text(v)};
  }
  // Draft 4: exclusiveMinimum (Maximum) is a flag that makes minimum
  // (maximum) exclusive.
  static void draft4_exclusive(const JsonValue* flag, std::optional<Bound>& inclusive,
                               std::optional<Bound>& exclusive) {
    if (flag == nullptr || flag->type != JsonType::kBool || !flag->boolean || !inclusive) return;
    exclusive = std::move(inclusive);
    inclusive.reset();
  }
  static std::optional<uint64_t> count(const JsonValue& v) {
    if (!is_integral(v) || v.number < 0) return std::nullopt;
    return static_cast<uint64_t>(v.number);
  }

  Status keyword(Node& n, const JsonValue& schema, std::string_view key, const JsonValue& value) {
    if (key == "type") {
      auto add = [&n](const JsonValue& name) {
        if (name.type != JsonType::kString || type_bit(name.str) == 0) return;
        n.types |= type_bit(name.str);
        if (!n.type_text.empty()) n.type_text += " or ";
        n.type_text += name.str;
      };
      if (value.type == JsonType::kArray)
        for (const JsonValue& name : value.items) add(name);
      else
        add(value);
    } else if (key == "properties" && value.type == JsonType::kObject) {
      for (const auto& [name, sub] : value.members) {
        auto p = node(sub);
        if (!p) return p.take_error();
        n.properties.emplace_back(name, *p);
      }
    } else if (key == "required" && value.type == JsonType::kArray) {
      for (const JsonValue& name : value.items)
        if (name.type == JsonType::kString) n.required.push_back(name.str);
    } else if (key == "additionalProperties") {
      if (schema.find("patternProperties") != nullptr) return {};
      if (value.type == JsonType::kBool) {
        n.additional_refused = !value.boolean;
        return {};
      }
      auto a = node(value);
      if (!a) return a.take_error();
      n.additional = *a;
    } else if (key == "items") {
      if (value.type == JsonType::kArray) {
        auto list = node_list(value);
        if (!list) return list.take_error();
        n.item_list = std::move(*list);
        return {};
      }
      auto i = node(value);
      if (!i) return i.take_error();
      n.items = *i;
    } else if (key == "enum" && value.type == JsonType::kArray) {
      n.enum_values = &value;
    } else if (key == "const") {
      n.const_value = &value;
    } else if (key == "minimum") {
      n.minimum = bound(value);
    } else if (key == "maximum") {
      n.maximum = bound(value);
    } else if (key == "exclusiveMinimum") {
      n.exclusive_minimum = bound(value);  // draft 4's boolean: see draft4_exclusive
    } else if (key == "exclusiveMaximum") {
      n.exclusive_maximum = bound(value);
    } else if (key == "minLength") {
      n.min_length = count(value);
    } else if (key == "maxLength") {
      n.max_length = count(value);
    } else if (key == "minItems") {
      n.min_items = count(value);
    } else if (key == "maxItems") {
      n.max_items = count(value);
    } else if (key == "allOf" || key == "anyOf" || key == "oneOf") {
      auto list = node_list(value);
      if (!list) return list.take_error();
      (key == "allOf" ? n.all_of : key == "anyOf" ? n.any_of : n.one_of) = std::move(*list);
    } else if (key == "$ref" && value.type == JsonType::kString) {
      auto target = resolve(value.str);
      if (!target) return target.take_error();
      if (*target == nullptr) return {};
      auto r = node(**target);
      if (!r) return r.take_error();
      n.ref = *r;
    }
    return {};
  }

  // The value a "#/..." reference points to; nullptr for a reference
  // elsewhere, which is not checked.
  Expected<const JsonValue*> resolve(std::string_view ref) {
    if (ref.empty() || ref[0] != '#') return nullptr;
    std::string_view pointer = ref.substr(1);
    if (!pointer.empty() && pointer[0] != '/') return nullptr;  // an anchor
    const JsonValue* at = &document_;
    while (!pointer.empty()) {
      pointer.remove_prefix(1);
      size_t end = pointer.find('/');
      std::string_view raw = pointer.substr(0, end);
      pointer = end == std::string_view::npos ? std::string_view() : pointer.substr(end);
      std::string step;
      for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
          step.push_back(raw[++i] == '0' ? '~' : '/');
          continue;
        }
        step.push_back(raw[i]);
      }
      const JsonValue* next = nullptr;
      if (at->type == JsonType::kObject) next = at->find(step);
      if (at->type == JsonType::kArray && !step.empty() &&
          step.find_first_not_of("0123456789") == std::string::npos) {
        size_t i = std::stoul(step);
        if (i < at->items.size()) next = &at->items[i];
      }
      if (next == nullptr) return data_error("$ref '{}' leads nowhere in the schema", ref);
      at = next;
    }
    return at;
  }

  static Status refuse(const std::string& path, std::string why) {
    if (path.empty()) return data_error("json-schema: the value: {}", why);
    return data_error("json-schema: field '{}': {}", path, why);
  }

  Status check(const Node& n, const JsonValue& v, std::string& path, int depth) const {
    if (depth > kMaxDepth) return refuse(path, "the schema's $ref chain goes round in a loop");
    if (n.refuse_all) return refuse(path, "not allowed by the schema");
    if (n.types != 0 && !has_type(n.types, v))
      return refuse(path, fmt::format("expected {}, found {}", n.type_text, found_name(v)));
    if (n.ref != nullptr) KPIPE_TRY(check(*n.ref, v, path, depth + 1));
    if (n.const_value != nullptr && !json_equal(*n.const_value, v))
      return refuse(path, fmt::format("expected {} (const), found {}", json_text(*n.const_value),
                                      json_text(v)));
    if (n.enum_values != nullptr) {
      bool found = false;
      for (const JsonValue& e : n.enum_values->items) found = found || json_equal(e, v);
      if (!found)
        return refuse(path, fmt::format("{} is not one of the enum's values {}", json_text(v),
                                        json_text(*n.enum_values)));
    }
    switch (v.type) {
      case JsonType::kNumber:
        KPIPE_TRY(check_number(n, v, path));
        break;
      case JsonType::kString: {
        size_t length = n.min_length || n.max_length ? code_points(v.str) : 0;
        if (n.min_length && length < *n.min_length)
          return refuse(
              path, fmt::format("{} characters, fewer than minLength {}", length, *n.min_length));
        if (n.max_length && length > *n.max_length)
          return refuse(
              path, fmt::format("{} characters, more than maxLength {}", length, *n.max_length));
        break;
      }
      case JsonType::kArray:
        KPIPE_TRY(check_array(n, v, path, depth));
        break;
      case JsonType::kObject:
        KPIPE_TRY(check_object(n, v, path, depth));
        break;
      default:
        break;
    }
    for (const Node* sub : n.all_of) KPIPE_TRY(check(*sub, v, path, depth + 1));
    // A branch that fails leaves its own field on `path`.
    size_t at = path.size();
    if (!n.any_of.empty()) {
      bool matched = false;
      for (const Node* sub : n.any_of) {
        matched = matched || check(*sub, v, path, depth + 1).ok();
        path.resize(at);
      }
      if (!matched) return refuse(path, "matches none of the schemas of anyOf");
    }
    if (!n.one_of.empty()) {
      size_t matched = 0;
      for (const Node* sub : n.one_of) {
        matched += check(*sub, v, path, depth + 1).ok();
        path.resize(at);
      }
      if (matched == 0) return refuse(path, "matches none of the schemas of oneOf");
      if (matched > 1)
        return refuse(path, fmt::format("matches {} of the schemas of oneOf, not one", matched));
    }
    return {};
  }

  static Status check_number(const Node& n, const JsonValue& v, const std::string& path) {
    if (n.minimum && v.number < n.minimum->value)
      return refuse(path,
                    fmt::format("{} is less than the minimum {}", number_text(v), n.minimum->text));
    if (n.maximum && v.number > n.maximum->value)
      return refuse(
          path, fmt::format("{} is greater than the maximum {}", number_text(v), n.maximum->text));
    if (n.exclusive_minimum && v.number <= n.exclusive_minimum->value)
      return refuse(path, fmt::format("{} is not greater than the exclusive minimum {}",
                                      number_text(v), n.exclusive_minimum->text));
    if (n.exclusive_maximum && v.number >= n.exclusive_maximum->value)
      return refuse(path, fmt::format("{} is not less than the exclusive maximum {}",
                                      number_text(v), n.exclusive_maximum->text));
    return {};
  }

  Status check_array(const Node& n, const JsonValue& v, std::string& path, int depth) const {
    size_t size = v.items.size();
    if (n.min_items && size < *n.min_items)
      return refuse(path, fmt::format("{} items, fewer than minItems {}", size, *n.min_items));
    if (n.max_items && size > *n.max_items)
      return refuse(path, fmt::format("{} items, more than maxItems {}", size, *n.max_items));
    size_t at = path.size();
    for (size_t i = 0; i < size; ++i) {
      const Node* item = i < n.item_list.size() ? n.item_list[i] : n.items;
      if (item == nullptr) continue;
      fmt::format_to(std::back_inserter(path), "[{}]", i);
      KPIPE_TRY(check(*item, v.items[i], path, depth + 1));
      path.resize(at);
    }
    return {};
  }

  Status check_object(const Node& n, const JsonValue& v, std::string& path, int depth) const {
    size_t at = path.size();
    for (const auto& [key, value] : v.members) {
      const Node* sub = n.additional;
      bool declared = false;
      for (const auto& [name, p] : n.properties) {
        if (name != key) continue;
        sub = p;
        declared = true;
        break;
      }
      append_key(path, key);
      if (!declared && n.additional_refused)
        return refuse(path, "not allowed (additionalProperties is false)");
      if (sub != nullptr) KPIPE_TRY(check(*sub, value, path, depth + 1));
      path.resize(at);
    }
    for (const std::string& name : n.required) {
      if (v.find(name) != nullptr) continue;
      append_key(path, name);
      return refuse(path, "required and missing");
    }
    return {};
  }

  JsonValue document_;
  std::deque<Node> nodes_;
  std::unordered_map<const JsonValue*, Node*> compiled_;
  const Node* root_ = nullptr;
};

class JsonSchemaCodec : public ValueCodec {
 public:
  explicit JsonSchemaCodec(SchemaRegistry& registry) : registry_(registry) {}

  Expected<int32_t> decode(std::string_view bytes, std::string& out) override {
    auto framed = unframe(bytes);
    if (!framed) return data_error("json-schema: {}", framed.error().message);
    auto schema = schema_for(framed->schema_id);
    if (!schema) return schema.take_error();
    auto valid = encoder_.check(framed->payload);
    if (!valid)
      return data_error("json-schema: payload of schema {}: {}", framed->schema_id,
                        valid.error().message);
    // Minified: a payload that a producer wrote over several lines must
    // not break the one line of its envelope.
    append_minified(out, framed->payload);
    return framed->schema_id;
  }

  Status encode(std::string_view json, int32_t schema_id, std::string& out) override {
    auto schema = schema_for(schema_id);
    if (!schema) return schema.take_error();
    auto value = parse_json(json);
    if (!value) return data_error("json-schema: {}", value.error().message);
    KPIPE_TRY((*schema)->validate(*value));
    append_frame(out, schema_id);
    out.append(json);
    return {};
  }

 private:
  Expected<const CompiledSchema*> schema_for(int32_t id) {
    if (auto it = schemas_.find(id); it != schemas_.end()) return it->second.get();
    if (auto it = broken_.find(id); it != broken_.end()) return it->second;
    auto compiled = load(id);
    if (!compiled) {
      // Ids never change meaning; a failure ends the run anyway.
      if (compiled.error().status == ExitStatus::kDataError) broken_.emplace(id, compiled.error());
      return compiled.take_error();
    }
    const CompiledSchema* schema = compiled->get();
    schemas_.emplace(id, std::move(*compiled));
    return schema;
  }

  Expected<std::unique_ptr<CompiledSchema>> load(int32_t id) {
    auto registered = registry_.by_id(id);
    if (!registered) return registered.take_error();
    if (registered->type != SchemaType::kJson)
      return data_error("json-schema: schema {} is {}, not JSON", id,
                        schema_type_name(registered->type));
    auto compiled = CompiledSchema::compile(registered->text);
    if (!compiled) return data_error("json-schema: schema {}: {}", id, compiled.error().message);
    return compiled;
  }

  SchemaRegistry& registry_;
  PayloadEncoder encoder_;
  std::unordered_map<int32_t, std::unique_ptr<CompiledSchema>> schemas_;
  std::unordered_map<int32_t, Error> broken_;
};

}  // namespace

std::unique_ptr<ValueCodec> make_json_schema_codec(SchemaRegistry& registry) {
  return std::make_unique<JsonSchemaCodec>(registry);
}

}  // namespace kpipe
