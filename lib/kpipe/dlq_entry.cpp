#include "kpipe/dlq_entry.h"

#include <algorithm>
#include <charconv>

#include "kpipe/choices.h"
#include "kpipe/json.h"
#include "kpipe/line.h"

namespace kpipe {

bool is_context_header(std::string_view name) {
  return name.starts_with("kpipe.error.") || name.starts_with("kpipe.source.") ||
         name.starts_with("kpipe.dlq.");
}

std::string DlqEntry::id_text() const {
  if (position) return fmt::format("{}:{}", position->partition, position->offset);
  return std::to_string(id);
}

bool DlqFilter::matches(const DlqEntry& e) const {
  if (!reason.empty() && e.reason.find(reason) == std::string::npos) return false;
  if (!stage.empty() && e.stage != stage &&
      !(e.stage.size() > stage.size() && e.stage.starts_with(stage) &&
        e.stage[stage.size()] == '/'))
    return false;
  if (!source_topic.empty() && (!e.source || e.source->topic != source_topic)) return false;
  if (since && e.at < *since) return false;
  if (until && e.at >= *until) return false;
  if (pending_only && e.replayed) return false;
  return true;
}

bool DlqFilter::narrows() const {
  return !reason.empty() || !stage.empty() || !source_topic.empty() || since || until;
}

std::string_view reason_cause(std::string_view reason) {
  if (!reason.starts_with("line ")) return reason;
  size_t i = 5;
  size_t digits = 0;
  while (i < reason.size() && reason[i] >= '0' && reason[i] <= '9') ++i, ++digits;
  if (digits == 0 || reason.substr(i, 2) != ": ") return reason;
  return reason.substr(i + 2);
}

namespace {

// Text that came from a header or a file may not be UTF-8: invalid bytes
// become U+FFFD, so that the output stays JSON.
void append_text(std::string& out, std::string_view text) {
  if (is_valid_utf8(text)) {
    append_json_string(out, text);
    return;
  }
  std::string clean;
  clean.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n > 0 && i + n <= text.size() && is_valid_utf8(text.substr(i, n))) {
      clean.append(text.substr(i, n));
      i += n;
      continue;
    }
    clean.append("\xef\xbf\xbd");
    ++i;
  }
  append_json_string(out, clean);
}

void append_time(std::string& out, Millis t) {
  out.push_back('"');
  append_rfc3339(out, t);
  out.push_back('"');
}

std::string source_text(const DlqEntry& e) {
  if (!e.source) return "-";
  return fmt::format("{}[{}]@{}", e.source->topic, e.source->partition, e.source->offset);
}

}  // namespace

namespace {

// One entry as a JSON object: kdlq list's line (`record` false), or the
// data of a dead letter in a Kinesis stream (`record`), which carries no
// id and no replay state, and names itself with kDeadLetterMark.
void append_entry_json(std::string& out, const DlqEntry& e, bool record) {
  if (record) {
    out.append("{\"");
    out.append(kDeadLetterMark);
    out.append("\":1");
  } else {
    out.append("{\"id\":");
    if (e.position) {
      append_json_string(out, e.id_text());
    } else {
      append_int(out, e.id);
    }
  }
  out.append(",\"at\":");
  append_time(out, e.at);
  out.append(",\"stage\":");
  append_text(out, e.stage);
  out.append(",\"reason\":");
  append_text(out, e.reason);
  out.append(",\"input\":");
  if (e.input.empty()) {
    out.append("null");
  } else {
    append_text(out, e.input);
  }
  out.append(",\"line\":");
  append_optional_int(out, e.line);
  out.append(",\"source_topic\":");
  if (e.source) {
    append_text(out, e.source->topic);
    out.append(",\"source_partition\":");
    append_int(out, e.source->partition);
    out.append(",\"source_offset\":");
    e.source->offset.append_json(out);
  } else {
    out.append("null,\"source_partition\":null,\"source_offset\":null");
  }
  if (!record) {
    out.append(",\"failures\":");
    append_optional_int(out, e.failures);
    out.append(",\"replayed\":");
    out.append(e.replayed ? "true" : "false");
    out.append(",\"replayed_at\":");
    if (e.replayed_at) {
      append_time(out, *e.replayed_at);
    } else {
      out.append("null");
    }
  }
  out.push_back(',');
  append_bytes_field(out, "payload", e.payload);
  out.push_back('}');
}

}  // namespace

void append_entry_ndjson(std::string& out, const DlqEntry& e) {
  append_entry_json(out, e, false);
  out.push_back('\n');
}

std::string dead_letter_json(const DeadLetter& d) {
  DlqEntry e;
  e.at = d.at;
  e.stage = d.stage;
  e.reason = d.reason;
  e.input = d.input;
  if (d.line > 0) e.line = static_cast<int64_t>(d.line);
  e.source = d.source;
  e.payload = d.payload;
  std::string out;
  append_entry_json(out, e, true);
  return out;
}

DlqEntry parse_dead_letter_json(std::string_view data) {
  DlqEntry e;
  auto v = parse_json(data);
  const JsonValue* mark = v && v->type == JsonType::kObject ? v->find(kDeadLetterMark) : nullptr;
  auto text = [&](std::string_view key) -> const std::string* {
    const JsonValue* f = v->find(key);
    return f != nullptr && f->type == JsonType::kString ? &f->str : nullptr;
  };
  const std::string* payload = mark != nullptr ? text("payload") : nullptr;
  const std::string* payload64 = mark != nullptr ? text("payload_base64") : nullptr;
  std::optional<std::string> bytes;
  if (payload != nullptr) {
    bytes = *payload;
  } else if (payload64 != nullptr) {
    if (auto decoded = decode_base64(*payload64)) bytes = std::move(*decoded);
  }
  // Anything else (not JSON, another object, a payload missing) is a
  // record kpipe did not write: its bytes are the payload.
  if (!bytes) {
    e.payload = data;
    return e;
  }
  e.payload = std::move(*bytes);
  if (const std::string* at = text("at")) {
    if (auto t = parse_rfc3339(*at)) e.at = *t;
  }
  if (const std::string* stage = text("stage")) e.stage = *stage;
  if (const std::string* reason = text("reason")) e.reason = *reason;
  if (const std::string* input = text("input")) e.input = *input;
  const JsonValue* line = v->find("line");
  if (line != nullptr && line->is_integer) e.line = line->integer;
  const std::string* topic = text("source_topic");
  const JsonValue* partition = v->find("source_partition");
  const JsonValue* offset = v->find("source_offset");
  if (topic != nullptr && partition != nullptr && partition->is_integer && offset != nullptr) {
    if (auto o = Position::from_json(*offset))
      e.source = SourcePosition{*topic, static_cast<int32_t>(partition->integer), *o};
  }
  return e;
}

TextTable make_entry_table() {
  return TextTable({"ID", "AT", "STAGE", "SOURCE", "REPLAYED", "REASON", "PAYLOAD"});
}

void add_entry_row(TextTable& table, const DlqEntry& e) {
  std::string replayed = "-";
  if (e.replayed_at) {
    replayed = format_rfc3339(*e.replayed_at);
  } else if (e.replayed) {
    replayed = "yes";
  }
  table.add_row({e.id_text(), format_rfc3339(e.at), preview(e.stage, 40), source_text(e), replayed,
                 preview(e.reason, 100), preview(e.payload, 60)});
}

std::string preview(std::string_view bytes, size_t max) {
  std::string out;
  size_t shown = 0;
  size_t i = 0;
  while (i < bytes.size()) {
    if (shown >= max) {
      out.append("...");
      break;
    }
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x20 || c == 0x7f) {
      out.append(fmt::format("\\x{:02x}", c));
      ++i;
      ++shown;
      continue;
    }
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n > 0 && i + n <= bytes.size() && is_valid_utf8(bytes.substr(i, n))) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append(fmt::format("\\x{:02x}", c));
      ++i;
    }
    ++shown;
  }
  return out;
}

// --- stats ---------------------------------------------------------------------------

Expected<DlqStats::By> DlqStats::parse_by(std::string_view text) {
  auto i = parse_choice("--by key", text, {"reason", "stage", "topic", "hour"});
  if (!i) return i.take_error();
  return static_cast<By>(*i);
}

const char* DlqStats::key_name() const {
  switch (by_) {
    case By::kReason:
      return "reason";
    case By::kStage:
      return "stage";
    case By::kTopic:
      return "topic";
    case By::kHour:
      return "hour";
  }
  return "?";
}

void DlqStats::add(const DlqEntry& e) {
  std::string key;
  bool null_key = false;
  switch (by_) {
    case By::kReason:
      key = reason_cause(e.reason);
      break;
    case By::kStage:
      key = e.stage;
      break;
    case By::kTopic:
      null_key = !e.source;
      if (e.source) key = e.source->topic;
      break;
    case By::kHour:
      key = format_rfc3339(floor_div(e.at, kHour) * kHour);
      break;
  }
  Group& g = groups_[null_key ? std::string() : key];
  g.null_key = null_key;
  if (g.count == 0 || e.at < g.first) g.first = e.at;
  if (g.count == 0 || e.at > g.last) g.last = e.at;
  ++g.count;
  ++total_;
  if (!e.replayed) {
    ++g.pending;
    ++pending_;
  }
}

std::vector<std::pair<std::string, const DlqStats::Group*>> DlqStats::sorted() const {
  std::vector<std::pair<std::string, const Group*>> out;
  for (const auto& [k, g] : groups_) out.emplace_back(k, &g);
  // Hours read as a timeline; everything else most frequent first.
  if (by_ != By::kHour) {
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return a.second->count > b.second->count;
    });
  }
  return out;
}

void DlqStats::render_table(std::string& out) const {
  std::string name = key_name();
  for (char& c : name) c = static_cast<char>(c - 'a' + 'A');
  TextTable table({name, "COUNT", "PENDING", "FIRST", "LAST"});
  for (const auto& [key, g] : sorted()) {
    std::string shown = g->null_key ? "-" : preview(key, 100);
    table.add_row({shown, std::to_string(g->count), std::to_string(g->pending),
                   format_rfc3339(g->first), format_rfc3339(g->last)});
  }
  table.add_row({"total", std::to_string(total_), std::to_string(pending_), "", ""});
  out.append(table.render());
}

void DlqStats::render_ndjson(std::string& out) const {
  for (const auto& [key, g] : sorted()) {
    out.append("{\"");
    out.append(key_name());
    out.append("\":");
    if (g->null_key) {
      out.append("null");
    } else {
      append_text(out, key);
    }
    out.append(",\"count\":");
    append_uint(out, g->count);
    out.append(",\"pending\":");
    append_uint(out, g->pending);
    out.append(",\"first\":");
    append_time(out, g->first);
    out.append(",\"last\":");
    append_time(out, g->last);
    out.append("}\n");
  }
}

// --- Kafka dead-letter records ----------------------------------------------------------

std::string envelope_line(const OwnedRecord& record, const SourcePosition& source) {
  RecordView v;
  v.topic = source.topic;
  v.partition = source.partition;
  v.offset = source.offset;
  v.timestamp = record.timestamp > 0 ? record.timestamp : -1;
  if (record.key) v.key = *record.key;
  if (record.value) v.value = *record.value;
  for (const auto& h : record.headers)
    v.headers.push_back(
        {h.name, h.value ? std::optional<std::string_view>(*h.value) : std::nullopt});
  EnvelopeWriter writer;
  std::string out;
  writer.append(out, v);
  out.pop_back();  // the '\n'
  return out;
}

OwnedRecord encode_dead_letter(const DeadLetter& d, EnvelopeReader& reader) {
  OwnedRecord r;
  bool restored = false;
  bool exact = false;
  if (d.source) {
    std::string padded(d.payload);
    padded.append(kJsonPadding, '\0');
    EnvelopeRecord env;
    if (reader.read(std::string_view(padded.data(), d.payload.size()), env).ok()) {
      restored = true;
      r.key = std::move(env.key);
      r.value = std::move(env.value);
      r.headers = std::move(env.headers);
      r.timestamp = env.timestamp.value_or(0);
      // The line comes back rebuilt from the record when that gives the
      // same bytes (what kconsume wrote); else it travels along, so that
      // replay to standard output stays byte for byte.
      exact = r.timestamp > 0 && envelope_line(r, *d.source) == d.payload;
    }
  }
  if (!restored) r.value = std::string(d.payload);
  auto add = [&](std::string_view name, std::string value) {
    r.headers.push_back({std::string(name), std::move(value)});
  };
  add(dlq_header::kReason, d.reason);
  add(dlq_header::kStage, d.stage);
  add(dlq_header::kAt, format_rfc3339(d.at));
  if (d.source) {
    add(dlq_header::kSourceTopic, d.source->topic);
    add(dlq_header::kSourcePartition, std::to_string(d.source->partition));
    add(dlq_header::kSourceOffset, d.source->offset.text());
  }
  if (!d.input.empty()) add(dlq_header::kInput, d.input);
  if (d.line > 0) add(dlq_header::kLine, std::to_string(d.line));
  add(dlq_header::kValue, restored ? "record" : "line");
  if (restored && !exact) add(dlq_header::kSourceLine, std::string(d.payload));
  return r;
}

namespace {

template <typename T>
std::optional<T> parse_number(std::string_view s) {
  T v{};
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

DlqEntry decode_dead_letter(const RecordView& r) {
  DlqEntry e;
  e.position = PartitionOffset{std::string(r.topic), r.partition, r.offset};
  e.at = r.timestamp;
  std::optional<std::string_view> at, value_kind, source_line, topic, partition, offset;
  OwnedRecord record;
  for (const Header& h : r.headers) {
    std::string_view v = h.value.value_or(std::string_view());
    if (!is_context_header(h.name)) {
      record.headers.push_back(
          {std::string(h.name),
           h.value ? std::optional<std::string>(std::string(*h.value)) : std::nullopt});
      continue;
    }
    if (h.name == dlq_header::kReason)
      e.reason = v;
    else if (h.name == dlq_header::kStage)
      e.stage = v;
    else if (h.name == dlq_header::kAt)
      at = v;
    else if (h.name == dlq_header::kInput)
      e.input = v;
    else if (h.name == dlq_header::kLine)
      e.line = parse_number<int64_t>(v);
    else if (h.name == dlq_header::kSourceTopic)
      topic = v;
    else if (h.name == dlq_header::kSourcePartition)
      partition = v;
    else if (h.name == dlq_header::kSourceOffset)
      offset = v;
    else if (h.name == dlq_header::kValue)
      value_kind = v;
    else if (h.name == dlq_header::kSourceLine)
      source_line = v;
  }
  if (at) {
    auto t = parse_rfc3339(*at);
    if (t) e.at = *t;
  }
  if (topic && partition && offset) {
    auto p = parse_number<int32_t>(*partition);
    auto o = Position::from_text(*offset);
    if (p && o) e.source = SourcePosition{std::string(*topic), *p, *o};
  }
  if (value_kind == "record") {
    if (r.key) record.key = std::string(*r.key);
    if (r.value) record.value = std::string(*r.value);
    record.timestamp = r.timestamp > 0 ? r.timestamp : 0;
    if (source_line) {
      e.payload = *source_line;
    } else if (e.source) {
      e.payload = envelope_line(record, *e.source);
    }
    e.record = std::move(record);
    return e;
  }
  if (r.value) e.payload = *r.value;
  return e;
}

}  // namespace kpipe
