#include "kpipe/schema/registry.h"

namespace kpipe {

std::string_view schema_type_name(SchemaType type) {
  switch (type) {
    case SchemaType::kProtobuf:
      return "PROTOBUF";
    case SchemaType::kJson:
      return "JSON";
    default:
      return "AVRO";
  }
}

Expected<std::unique_ptr<SchemaRegistry>> open_registry(const RegistryOptions&) {
  return failure("registry: not built yet");
}

}  // namespace kpipe
