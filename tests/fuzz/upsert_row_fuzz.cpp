// kupsert's row building (kpipe/store/upsert_writer.h, the writer
// programs/kupsert.cpp drives): NDJSON objects become rows of an SQLite
// table upserted by the key "id". Properties: a line that add() accepts is
// one valid JSON object (by the independent parse_json) with a non-null
// "id"; SQLite refuses no accepted row of a table kupsert made itself; and
// read back, the table holds what the lines said: for lines whose ids are
// plain words, each text cell equals the last string written to it, each
// object or array cell is JSON equal to the last one written, each number
// equal as a number, each null a NULL.
//
// Input: up to 8 lines, '\n'-separated, each in an exactly padded buffer.
#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "kpipe/json.h"
#include "kpipe/store/sql.h"
#include "kpipe/store/upsert_writer.h"

namespace {

using kpipe::JsonType;
using kpipe::JsonValue;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A canonical text for comparing two trees: numbers by their text.
void canon(std::string& out, const JsonValue& v) {
  switch (v.type) {
    case JsonType::kNull:
      out += "null";
      break;
    case JsonType::kBool:
      out += v.boolean ? "true" : "false";
      break;
    case JsonType::kNumber:
      out += v.str;
      break;
    case JsonType::kString:
      kpipe::append_json_string(out, v.str);
      break;
    case JsonType::kArray:
      out += '[';
      for (const auto& item : v.items) {
        canon(out, item);
        out += ',';
      }
      out += ']';
      break;
    case JsonType::kObject:
      out += '{';
      for (const auto& [k, m] : v.members) {
        kpipe::append_json_string(out, k);
        out += ':';
        canon(out, m);
        out += ',';
      }
      out += '}';
      break;
    default:
      break;
  }
}

bool plain_word(const JsonValue* id) {
  if (id == nullptr || id->type != JsonType::kString || id->str.empty()) return false;
  for (char c : id->str)
    if (c < 'a' || c > 'z') return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> texts;
  while (!rest.empty() && texts.size() < 8) {
    const size_t nl = rest.find('\n');
    texts.push_back(rest.substr(0, nl));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  }

  auto db = kpipe::Database::open(":memory:");
  FUZZ_CHECK(db.ok());
  kpipe::TableSpec spec;
  spec.table = "t";
  spec.key = {"id"};
  auto writer = kpipe::UpsertWriter::open(**db, spec);
  FUZZ_CHECK(writer.ok());

  // The model: for rows keyed by a plain word, each column's last value.
  std::map<std::string, std::map<std::string, JsonValue>> model;
  bool checkable = true;
  size_t accepted = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    kpipe::fuzz::PaddedInput input(texts[i]);
    kpipe::Line line;
    line.text = input.view();
    line.number = i + 1;
    line.input = "fuzz";
    if (!(*writer)->add(line).ok()) continue;
    ++accepted;
    auto tree = kpipe::parse_json(line.text);
    FUZZ_CHECK(tree.ok());
    FUZZ_CHECK(tree->type == JsonType::kObject);
    const JsonValue* id = tree->find("id");
    if (id == nullptr) {
      // The key column matched by ASCII case.
      for (const auto& [k, v] : tree->members)
        if (lower(k) == "id") id = &v;
    }
    FUZZ_CHECK(id != nullptr && id->type != JsonType::kNull);
    if (!plain_word(id)) {
      checkable = false;
      continue;
    }
    auto& row = model[id->str];
    std::map<std::string, int> seen;
    for (const auto& [k, v] : tree->members) {
      if (++seen[lower(k)] > 1) checkable = false;  // which one lands is the writer's
      row[lower(k)] = v;
    }
    // Pending rows must be written before a later line changes a
    // column's type: write each accepted line at once.
    auto tx = (*writer)->begin();
    FUZZ_CHECK(tx.ok());
    size_t refused = 0;
    FUZZ_CHECK((*writer)
                   ->write_pending([&](const std::string&, const kpipe::Line&, std::string_view) {
                     ++refused;
                     return kpipe::Status();
                   })
                   .ok());
    FUZZ_CHECK(tx->commit().ok());
    if (refused != 0) checkable = false;
  }
  {
    auto tx = (*writer)->begin();
    FUZZ_CHECK(tx.ok());
    FUZZ_CHECK((*writer)
                   ->write_pending([&](const std::string&, const kpipe::Line&, std::string_view) {
                     return kpipe::Status();
                   })
                   .ok());
    FUZZ_CHECK(tx->commit().ok());
  }
  if (accepted == 0 || !checkable) return 0;

  auto stmt = (**db).prepare("SELECT * FROM \"t\"");
  FUZZ_CHECK(stmt.ok());
  size_t rows = 0;
  for (;;) {
    auto more = stmt->step();
    FUZZ_CHECK(more.ok());
    if (!*more) break;
    ++rows;
    auto& s = *stmt;
    std::string id;
    for (int c = 0; c < s.column_count(); ++c)
      if (lower(s.column_name(c)) == "id") id = std::string(s.column_text(c));
    auto it = model.find(id);
    FUZZ_CHECK(it != model.end());
    for (int c = 0; c < s.column_count(); ++c) {
      auto want = it->second.find(lower(s.column_name(c)));
      if (want == it->second.end()) continue;
      const JsonValue& v = want->second;
      const auto type = s.column_type(c);
      switch (v.type) {
        case JsonType::kNull:
          FUZZ_CHECK(type == kpipe::Statement::Type::kNull);
          break;
        case JsonType::kString:
          if (type == kpipe::Statement::Type::kText) FUZZ_CHECK(s.column_text(c) == v.str);
          break;
        case JsonType::kObject:
        case JsonType::kArray: {
          FUZZ_CHECK(type == kpipe::Statement::Type::kText);
          auto cell = kpipe::parse_json(s.column_text(c));
          FUZZ_CHECK(cell.ok());
          std::string a, b;
          canon(a, *cell);
          canon(b, v);
          FUZZ_CHECK(a == b);
          break;
        }
        case JsonType::kNumber:
          if (type == kpipe::Statement::Type::kInteger || type == kpipe::Statement::Type::kFloat) {
            const double got = type == kpipe::Statement::Type::kInteger
                                   ? static_cast<double>(s.column_int(c))
                                   : s.column_double(c);
            FUZZ_CHECK(got == v.number);
          }
          break;
        default:
          break;
      }
    }
  }
  FUZZ_CHECK(rows == model.size());
  return 0;
}
