#include "kpipe/control.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "kpipe/json.h"

namespace kpipe {

namespace {

Status read_group(const JsonValue& tree, std::string& group) {
  const JsonValue* g = tree.find("group");
  if (g == nullptr) return {};
  if (g->type != JsonType::kString) return data_error("checkpoint line: 'group' must be a string");
  group = g->str;
  return {};
}

void append_group(std::string& out, const std::string& group) {
  if (group.empty()) return;
  out.append(",\"group\":");
  append_json_string(out, group);
}

// An owned partition's epoch: positive when present (kpipe(7), MANY
// INSTANCES), 0 when absent.
Status read_epoch(const JsonValue& item, std::string_view line, int64_t& epoch) {
  const JsonValue* e = item.find("epoch");
  if (e == nullptr) return {};
  if (!e->is_integer || e->integer <= 0)
    return data_error("{} line: 'epoch' must be a positive integer", line);
  epoch = e->integer;
  return {};
}

void append_epoch(std::string& out, int64_t epoch) {
  if (epoch <= 0) return;
  out.append(",\"epoch\":");
  append_int(out, epoch);
}

constexpr std::string_view kCommitMetadataPrefix = "kpipe:checkpoint:";

}  // namespace

std::string checkpoint_commit_metadata(const CheckpointMark& mark) {
  return fmt::format("{}{}:{}", kCommitMetadataPrefix, mark.id, mark.at);
}

std::optional<CheckpointMark> parse_checkpoint_commit_metadata(std::string_view metadata) {
  if (!metadata.starts_with(kCommitMetadataPrefix)) return std::nullopt;
  metadata.remove_prefix(kCommitMetadataPrefix.size());
  size_t colon = metadata.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  // Digits only: from_chars alone would take a sign.
  auto number = [](std::string_view digits, int64_t& out) {
    if (digits.empty() || digits[0] < '0' || digits[0] > '9') return false;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return ec == std::errc() && end == digits.data() + digits.size();
  };
  CheckpointMark mark;
  if (!number(metadata.substr(0, colon), mark.id) || !number(metadata.substr(colon + 1), mark.at))
    return std::nullopt;
  return mark;
}

Expected<std::optional<Checkpoint>> parse_checkpoint(std::string_view line) {
  auto tree = parse_json(line);
  if (!tree) return data_error("control line: {}", tree.error().message);
  const JsonValue* kind = tree->find("$kpipe");
  if (kind == nullptr || kind->type != JsonType::kString || kind->str != "checkpoint")
    return std::optional<Checkpoint>{};
  Checkpoint c;
  const JsonValue* id = tree->find("id");
  if (id == nullptr || !id->is_integer || id->integer < 0)
    return data_error("checkpoint line: 'id' must be a non-negative integer");
  c.id = id->integer;
  const JsonValue* at = tree->find("at");
  if (at != nullptr && at->is_integer) c.at = at->integer;
  KPIPE_TRY(read_group(*tree, c.group));
  if (const JsonValue* member = tree->find("member"); member != nullptr) {
    if (member->type != JsonType::kString)
      return data_error("checkpoint line: 'member' must be a string");
    auto bytes = decode_base64(member->str);
    if (!bytes) return data_error("checkpoint line: 'member': {}", bytes.error().message);
    c.member = std::move(*bytes);
  }
  const JsonValue* offsets = tree->find("offsets");
  if (offsets != nullptr) {
    if (offsets->type != JsonType::kArray)
      return data_error("checkpoint line: 'offsets' must be an array");
    for (const JsonValue& o : offsets->items) {
      const JsonValue* topic = o.find("topic");
      const JsonValue* partition = o.find("partition");
      const JsonValue* offset = o.find("offset");
      if (topic == nullptr || topic->type != JsonType::kString || partition == nullptr ||
          !partition->is_integer || offset == nullptr)
        return data_error("checkpoint line: each offset needs 'topic', 'partition' and 'offset'");
      // An offset is a number, a Kinesis sequence number a string (kpipe(7), LOGS).
      auto position = Position::from_json(*offset);
      if (!position)
        return data_error(
            "checkpoint line: 'offset' must be an integer or a string of a sequence number's "
            "digits");
      if (partition->integer < INT32_MIN || partition->integer > INT32_MAX)
        return data_error("checkpoint line: partition {} is out of range", partition->integer);
      PartitionOffset po{topic->str, static_cast<int32_t>(partition->integer),
                         std::move(*position)};
      KPIPE_TRY(read_epoch(o, "checkpoint", po.epoch));
      c.offsets.push_back(std::move(po));
    }
    // One kconsume wrote the line: an instance's, or a single pipeline's.
    size_t owned = static_cast<size_t>(std::count_if(
        c.offsets.begin(), c.offsets.end(), [](const PartitionOffset& o) { return o.epoch > 0; }));
    if (owned != 0 && owned != c.offsets.size())
      return data_error("checkpoint line: either every offset has an 'epoch' or none");
  }
  return std::optional<Checkpoint>{std::move(c)};
}

void append_checkpoint(std::string& out, const Checkpoint& c) {
  out.append("{\"$kpipe\":\"checkpoint\",\"id\":");
  append_int(out, c.id);
  out.append(",\"at\":");
  append_int(out, c.at);
  append_group(out, c.group);
  if (!c.member.empty()) {
    out.append(",\"member\":\"");
    append_base64(out, c.member);
    out.push_back('"');
  }
  out.append(",\"offsets\":[");
  bool first = true;
  for (const auto& o : c.offsets) {
    if (!first) out.push_back(',');
    first = false;
    out.append("{\"topic\":");
    append_json_string(out, o.topic);
    out.append(",\"partition\":");
    append_int(out, o.partition);
    out.append(",\"offset\":");
    o.offset.append_json(out);
    append_epoch(out, o.epoch);
    out.push_back('}');
  }
  out.append("]}\n");
}

Expected<std::optional<InstanceLine>> parse_instance_line(std::string_view line) {
  // Data lines are most lines: no parse for what cannot be a control line.
  if (line.find("\"$kpipe\"") == std::string_view::npos) return std::optional<InstanceLine>{};
  auto tree = parse_json(line);
  if (!tree || tree->type != JsonType::kObject) return std::optional<InstanceLine>{};
  const JsonValue* kind = tree->find("$kpipe");
  if (kind == nullptr || kind->type != JsonType::kString || kind->str != "instance")
    return std::optional<InstanceLine>{};
  InstanceLine i;
  const JsonValue* name = tree->find("name");
  if (name == nullptr || name->type != JsonType::kString || name->str.empty())
    return data_error("instance line: 'name' must be a non-empty string");
  i.name = name->str;
  KPIPE_TRY(read_group(*tree, i.group));
  const JsonValue* pipeline = tree->find("pipeline");
  if (pipeline == nullptr || pipeline->type != JsonType::kString || pipeline->str.empty())
    return data_error("instance line: 'pipeline' must be a non-empty string");
  i.pipeline = pipeline->str;
  return std::optional<InstanceLine>{std::move(i)};
}

void append_instance_line(std::string& out, const InstanceLine& i) {
  out.append("{\"$kpipe\":\"instance\",\"name\":");
  append_json_string(out, i.name);
  append_group(out, i.group);
  out.append(",\"pipeline\":");
  append_json_string(out, i.pipeline);
  out.append("}\n");
}

namespace {

constexpr const char* kPartitionEventNames[] = {"assigned", "revoked"};

}  // namespace

Expected<std::optional<PartitionEvent>> parse_partition_event(std::string_view line) {
  auto tree = parse_json(line);
  if (!tree) return data_error("control line: {}", tree.error().message);
  const JsonValue* kind = tree->find("$kpipe");
  if (kind == nullptr || kind->type != JsonType::kString || kind->str != "partitions")
    return std::optional<PartitionEvent>{};
  PartitionEvent e;
  const JsonValue* event = tree->find("event");
  if (event == nullptr || event->type != JsonType::kString)
    return data_error("partitions line: 'event' must be a string");
  bool known = false;
  for (size_t i = 0; i < 2; ++i) {
    if (event->str != kPartitionEventNames[i]) continue;
    e.kind = static_cast<PartitionEvent::Kind>(i);
    known = true;
  }
  // A newer kind of event: forwarded, not acted on.
  if (!known) return std::optional<PartitionEvent>{};
  const JsonValue* parts = tree->find("partitions");
  if (parts == nullptr || parts->type != JsonType::kArray)
    return data_error("partitions line: 'partitions' must be an array");
  for (const JsonValue& p : parts->items) {
    const JsonValue* topic = p.find("topic");
    const JsonValue* partition = p.find("partition");
    if (topic == nullptr || topic->type != JsonType::kString || partition == nullptr ||
        !partition->is_integer)
      return data_error("partitions line: each partition needs 'topic' and 'partition'");
    if (partition->integer < INT32_MIN || partition->integer > INT32_MAX)
      return data_error("partitions line: partition {} is out of range", partition->integer);
    e.partitions.push_back({topic->str, static_cast<int32_t>(partition->integer)});
    int64_t epoch = 0;
    KPIPE_TRY(read_epoch(p, "partitions", epoch));
    // Owned partitions are all owned: one line comes from one kconsume.
    if (epoch > 0 && e.epochs.size() + 1 != e.partitions.size())
      return data_error("partitions line: either every partition has an 'epoch' or none");
    if (epoch > 0) e.epochs.push_back(epoch);
  }
  if (!e.epochs.empty() && e.epochs.size() != e.partitions.size())
    return data_error("partitions line: either every partition has an 'epoch' or none");
  return std::optional<PartitionEvent>{std::move(e)};
}

void append_partition_event(std::string& out, const PartitionEvent& e) {
  out.append("{\"$kpipe\":\"partitions\",\"event\":\"");
  out.append(kPartitionEventNames[static_cast<size_t>(e.kind)]);
  out.append("\",\"partitions\":[");
  bool first = true;
  for (const auto& p : e.partitions) {
    if (!first) out.push_back(',');
    first = false;
    out.append("{\"topic\":");
    append_json_string(out, p.topic);
    out.append(",\"partition\":");
    append_int(out, p.partition);
    if (e.owned()) append_epoch(out, e.epochs[static_cast<size_t>(&p - e.partitions.data())]);
    out.push_back('}');
  }
  out.append("]}\n");
}

}  // namespace kpipe
