// Decodes Avro payloads from memory with kconsume's codec, timing nothing
// but the decoding: the same measure as bench/avro.sh's python3-avro line.
//
//   avro_decode SCHEMA.avsc ID < payloads.b64   (one framed payload, base64, per line)
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kpipe/json.h"
#include "kpipe/schema/avro_codec.h"

namespace {

// The one schema the payloads were written with.
class OneSchema : public kpipe::SchemaRegistry {
 public:
  explicit OneSchema(kpipe::RegisteredSchema s) : schema_(std::move(s)) {}
  kpipe::Expected<kpipe::RegisteredSchema> by_id(int32_t id) override {
    if (id != schema_.id) return kpipe::data_error("schema {} is not in the registry", id);
    return schema_;
  }
  kpipe::Expected<kpipe::RegisteredSchema> version(std::string_view, int32_t) override {
    return schema_;
  }
  kpipe::Expected<int32_t> lookup(std::string_view, const kpipe::RegisteredSchema&, bool) override {
    return schema_.id;
  }
  std::string describe() const override { return "memory"; }

 private:
  kpipe::RegisteredSchema schema_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: avro_decode SCHEMA.avsc ID < payloads.b64\n";
    return 2;
  }
  std::ifstream file(argv[1]);
  std::stringstream text;
  text << file.rdbuf();
  kpipe::RegisteredSchema schema;
  schema.id = std::stoi(argv[2]);
  schema.text = text.str();
  std::vector<std::string> payloads;
  for (std::string line; std::getline(std::cin, line);) {
    auto bytes = kpipe::decode_base64(line);
    if (!bytes) {
      std::cerr << "avro_decode: " << bytes.error().message << "\n";
      return 1;
    }
    payloads.push_back(std::move(*bytes));
  }
  OneSchema registry(schema);
  auto codec = kpipe::make_avro_codec(registry, {});
  std::string out;
  size_t bytes_out = 0;
  auto start = std::chrono::steady_clock::now();
  for (const std::string& p : payloads) {
    out.clear();
    auto id = codec->decode(p, out);
    if (!id) {
      std::cerr << "avro_decode: " << id.error().message << "\n";
      return 1;
    }
    bytes_out += out.size();
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "kpipe's Avro codec: %.2f s, %.0f records/s (decoding only, from memory; %.0f bytes of JSON "
      "each)\n",
      s, payloads.size() / s, static_cast<double>(bytes_out) / payloads.size());
  return 0;
}
