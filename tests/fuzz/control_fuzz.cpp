// Control lines (kpipe/control.h): a checkpoint or partitions line that
// parses writes back (append_*) to a line that parses to an equal control,
// and whose own text is a fixed point; a line is_control_line() takes for
// one is an object whose first key is "$kpipe"; commit metadata round-trips.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "kpipe/control.h"
#include "kpipe/json.h"

namespace {

bool same(const kpipe::Checkpoint& a, const kpipe::Checkpoint& b) {
  return a.id == b.id && a.at == b.at && a.group == b.group && a.offsets == b.offsets;
}

bool same(const kpipe::PartitionEvent& a, const kpipe::PartitionEvent& b) {
  return a.kind == b.kind && a.partitions == b.partitions && a.epochs == b.epochs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // parse_json promises nothing about padding: no padding at all.
  kpipe::fuzz::ExactInput input(data, size);
  const std::string_view line = input.view();

  auto c = kpipe::parse_checkpoint(line);
  if (c.ok() && c->has_value()) {
    std::string out;
    kpipe::append_checkpoint(out, **c);
    FUZZ_CHECK(!out.empty() && out.back() == '\n');
    FUZZ_CHECK(kpipe::is_control_line(out));
    auto again = kpipe::parse_checkpoint(std::string_view(out).substr(0, out.size() - 1));
    FUZZ_CHECK(again.ok() && again->has_value());
    FUZZ_CHECK(same(**c, **again));
    std::string out2;
    kpipe::append_checkpoint(out2, **again);
    FUZZ_CHECK(out == out2);
  }

  auto e = kpipe::parse_partition_event(line);
  if (e.ok() && e->has_value()) {
    std::string out;
    kpipe::append_partition_event(out, **e);
    FUZZ_CHECK(kpipe::is_control_line(out));
    auto again = kpipe::parse_partition_event(out);
    FUZZ_CHECK(again.ok() && again->has_value());
    FUZZ_CHECK(same(**e, **again));
  }

  if (kpipe::is_control_line(line)) {
    auto tree = kpipe::parse_json(line);
    if (tree.ok()) {
      FUZZ_CHECK(tree->type == kpipe::JsonType::kObject);
      FUZZ_CHECK(!tree->members.empty() && tree->members.front().first == "$kpipe");
    }
  }

  if (auto mark = kpipe::parse_checkpoint_commit_metadata(line)) {
    auto again = kpipe::parse_checkpoint_commit_metadata(kpipe::checkpoint_commit_metadata(*mark));
    FUZZ_CHECK(again.has_value() && *again == *mark);
  }
  return 0;
}
