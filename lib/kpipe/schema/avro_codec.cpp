#include "kpipe/schema/avro_codec.h"

#include <memory>
#include <string>

#include "kpipe/json.h"
#include "kpipe/schema/avro_internal.h"

namespace kpipe {

namespace avro {

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

AvroCodec::AvroCodec(SchemaRegistry& registry, const DecodeOptions& options)
    : registry_(registry), options_(options) {
  writer_ = avro_writer_memory("", 0);
}

AvroCodec::~AvroCodec() {
  // The compiled schemas' values go before the reader and writer.
  cache_.clear();
  if (writer_ != nullptr) avro_writer_free(writer_);
}

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

}  // namespace avro

std::unique_ptr<ValueCodec> make_avro_codec(SchemaRegistry& registry,
                                            const DecodeOptions& options) {
  avro::use_block_allocator();
  return std::make_unique<avro::AvroCodec>(registry, options);
}

}  // namespace kpipe
