// An in-memory Schema Registry for the codecs' tests: subjects with
// versions, ids given in order from 1, and a count of lookups by id (to
// check that codecs cache).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kpipe/schema/registry.h"

namespace kpipe {

class FakeRegistry : public SchemaRegistry {
 public:
  // Registers `text` as the next version of `subject`; returns its id.
  int32_t add(const std::string& subject, SchemaType type, std::string text,
              std::vector<SchemaReference> references = {}) {
    RegisteredSchema s;
    s.id = static_cast<int32_t>(by_id_.size()) + 1;
    s.type = type;
    s.text = std::move(text);
    s.references = std::move(references);
    by_id_[s.id] = s;
    subjects_[subject].push_back(s.id);
    return s.id;
  }

  Expected<RegisteredSchema> by_id(int32_t id) override {
    ++id_lookups;
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return data_error("schema {} not found in the registry", id);
    return it->second;
  }
  Expected<RegisteredSchema> version(std::string_view subject, int32_t version) override {
    auto it = subjects_.find(std::string(subject));
    if (it == subjects_.end()) return failure("subject '{}' not found", subject);
    const auto& ids = it->second;
    if (version == -1) return by_id_.at(ids.back());
    if (version < 1 || static_cast<size_t>(version) > ids.size())
      return failure("subject '{}' has no version {}", subject, version);
    return by_id_.at(ids[static_cast<size_t>(version) - 1]);
  }
  Expected<int32_t> lookup(std::string_view subject, const RegisteredSchema& schema,
                           bool register_new) override {
    auto it = subjects_.find(std::string(subject));
    if (it != subjects_.end())
      for (int32_t id : it->second)
        if (by_id_.at(id).text == schema.text) return id;
    if (!register_new) return failure("schema not found under subject '{}'", subject);
    return add(std::string(subject), schema.type, schema.text, schema.references);
  }
  std::string describe() const override { return "fake registry"; }

  int id_lookups = 0;

 private:
  std::map<int32_t, RegisteredSchema> by_id_;
  std::map<std::string, std::vector<int32_t>> subjects_;
};

}  // namespace kpipe
