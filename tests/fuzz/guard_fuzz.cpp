// kdlq guard's validator (kpipe/guard.h) and the payload encoder the
// envelope embeds with (kpipe/json.h). Properties: a line the guard accepts
// is valid JSON by two other parsers (parse_json's tree and the encoder's
// DOM validation), and holds every required field, not null, of its type;
// what the encoder embeds as JSON or as a string reads back as the bytes
// it was given; base64 round-trips.
//
// Input: a first byte that says how many --require texts follow (0-3), each
// ended by '\n'; the rest is the line, in an exactly padded heap buffer.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "kpipe/guard.h"
#include "kpipe/json.h"

namespace {

using kpipe::FieldType;
using kpipe::JsonType;
using kpipe::JsonValue;

const JsonValue* find_first(const JsonValue& root, const kpipe::FieldPath& path) {
  const JsonValue* v = &root;
  for (const auto& step : path.steps()) {
    if (v->type == JsonType::kObject && step.has_key) {
      v = v->find(step.key);
      if (v == nullptr) return nullptr;
    } else if (v->type == JsonType::kArray && step.has_index && step.index < v->items.size()) {
      v = &v->items[step.index];
    } else {
      return nullptr;
    }
  }
  return v;
}

bool has_duplicate_keys(const JsonValue& v) {
  for (size_t i = 0; i < v.members.size(); ++i) {
    for (size_t j = i + 1; j < v.members.size(); ++j)
      if (v.members[i].first == v.members[j].first) return true;
    if (has_duplicate_keys(v.members[i].second)) return true;
  }
  for (const auto& item : v.items)
    if (has_duplicate_keys(item)) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t wanted = data[0] % 4;
  std::vector<kpipe::Requirement> requirements;
  for (size_t i = 0; i < wanted; ++i) {
    const size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) return 0;
    auto r = kpipe::parse_requirement(rest.substr(0, nl));
    rest.remove_prefix(nl + 1);
    if (!r) return 0;
    requirements.push_back(std::move(*r));
  }
  kpipe::fuzz::PaddedInput input(rest);
  const std::string_view line = input.view();

  kpipe::Guard guard(requirements);
  const kpipe::Status verdict = guard.check(line);
  kpipe::PayloadEncoder encoder;
  if (verdict.ok()) {
    auto tree = kpipe::parse_json(line);
    FUZZ_CHECK(tree.ok());
    FUZZ_CHECK(encoder.is_json(line));
    FUZZ_CHECK(encoder.check(line).ok());
    if (!has_duplicate_keys(*tree)) {
      for (const auto& r : requirements) {
        const JsonValue* v = find_first(*tree, r.path);
        FUZZ_CHECK(v != nullptr);
        FUZZ_CHECK(v->type != JsonType::kNull);
        switch (r.type) {
          case FieldType::kString:
            FUZZ_CHECK(v->type == JsonType::kString);
            break;
          case FieldType::kNumber:
          case FieldType::kInteger:
            FUZZ_CHECK(v->type == JsonType::kNumber);
            break;
          case FieldType::kBool:
            FUZZ_CHECK(v->type == JsonType::kBool);
            break;
          case FieldType::kObject:
            FUZZ_CHECK(v->type == JsonType::kObject);
            break;
          case FieldType::kArray:
            FUZZ_CHECK(v->type == JsonType::kArray);
            break;
          default:
            break;
        }
      }
    }
  } else {
    FUZZ_CHECK(!verdict.error().message.empty());
  }
  // With no requirement, the guard is exactly the whole-line validator.
  if (requirements.empty()) FUZZ_CHECK(verdict.ok() == encoder.is_json(line));

  // The encoder: JSON embedded minified means the same; text embedded as a
  // string reads back byte for byte; only what is neither is binary.
  std::string out;
  const auto kind = encoder.append(out, line);
  switch (kind) {
    case kpipe::PayloadEncoder::Kind::kJson: {
      auto a = kpipe::parse_json(line);
      auto b = kpipe::parse_json(out);
      FUZZ_CHECK(a.ok() && b.ok() && a->type == b->type);
      std::string twice;
      kpipe::append_minified(twice, out);
      FUZZ_CHECK(twice == out);
      break;
    }
    case kpipe::PayloadEncoder::Kind::kString: {
      auto b = kpipe::parse_json(out);
      FUZZ_CHECK(b.ok() && b->type == JsonType::kString && b->str == line);
      break;
    }
    case kpipe::PayloadEncoder::Kind::kBinary:
      FUZZ_CHECK(out.empty());
      FUZZ_CHECK(!kpipe::is_valid_utf8(line));
      break;
  }

  std::string b64;
  kpipe::append_base64(b64, line);
  auto decoded = kpipe::decode_base64(b64);
  FUZZ_CHECK(decoded.ok() && *decoded == line);
  if (auto d = kpipe::decode_base64(line)) {
    std::string again;
    kpipe::append_base64(again, *d);
    auto d2 = kpipe::decode_base64(again);
    FUZZ_CHECK(d2.ok() && *d2 == *d);
  }
  return 0;
}
