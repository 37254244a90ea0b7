#include "kpipe/stage/stateful.h"

#include <cstring>
#include <utility>

#include "kpipe/control.h"
#include "kpipe/envelope.h"

namespace kpipe {

namespace {

// Options are saved as a JSON array of strings.
std::string encode_options(const std::vector<std::string>& options) {
  std::string v = "[";
  for (size_t i = 0; i < options.size(); ++i) {
    if (i > 0) v.push_back(',');
    append_json_string(v, options[i]);
  }
  v.push_back(']');
  return v;
}

std::optional<std::vector<std::string>> decode_options(std::string_view value) {
  auto v = parse_json(value);
  if (!v || v->type != JsonType::kArray) return std::nullopt;
  std::vector<std::string> options;
  for (const JsonValue& item : v->items) {
    if (item.type != JsonType::kString) return std::nullopt;
    options.push_back(item.str);
  }
  return options;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += " and ";
    out += item;
  }
  return out;
}

}  // namespace

// Stands between the store and the engine while restoring: takes the
// format marker and the options out of the entries, and refuses the state
// at the end if its format or its options are not the stage's, before the
// engine finishes and the store commits.
class StageState::Restoring final : public Snapshottable {
 public:
  Restoring(const StageState& state) : state_(state) {}

  void take_changes(StateChanges& out) override { state_.engine_.take_changes(out); }

  Status restore_entry(std::string_view key, std::string_view value) override {
    if (key == kStateFormatKey) {
      saved_marker_ = std::string(value);
      return {};
    }
    if (key == kStateOptionsKey) {
      saved_options_ = decode_options(value);
      if (!saved_options_)
        return failure("the saved state of '{}' has a malformed options entry", state_.stage_);
      return {};
    }
    any_ = true;
    return state_.engine_.restore_entry(key, value);
  }

  Status finish_restore() override {
    KPIPE_TRY(check_format());
    KPIPE_TRY(check_options());
    return state_.engine_.finish_restore();
  }

  bool marked() const { return saved_marker_.has_value(); }
  bool has_options() const { return saved_options_.has_value(); }

 private:
  Status check_format() const {
    const StateFormat& format = state_.format_;
    if (saved_marker_) {
      if (*saved_marker_ == format.marker) return {};
      return failure(
          "the saved state of '{}' is of format '{}', which this stage does not read: give another "
          "--name or state file",
          state_.stage_, *saved_marker_);
    }
    if (!any_ || format.unmarked_refusal.empty()) return {};
    return failure("the saved state of '{}' {}: give another --name or state file", state_.stage_,
                   format.unmarked_refusal);
  }

  // Names only the options that differ, when the two lists say the same
  // things in the same order.
  Status check_options() const {
    const std::vector<std::string>& now = state_.format_.options;
    if (!saved_options_ || now.empty() || *saved_options_ == now) return {};
    std::vector<std::string> was_said, now_said;
    if (saved_options_->size() == now.size()) {
      for (size_t i = 0; i < now.size(); ++i) {
        if ((*saved_options_)[i] == now[i]) continue;
        was_said.push_back((*saved_options_)[i]);
        now_said.push_back(now[i]);
      }
    } else {
      was_said = *saved_options_;
      now_said = now;
    }
    return failure(
        "the saved state of '{}' was made with {}, not {}: give another --name or state file",
        state_.stage_, join(was_said), join(now_said));
  }

  const StageState& state_;
  std::optional<std::string> saved_marker_;
  std::optional<std::vector<std::string>> saved_options_;
  bool any_ = false;  // entries besides the marker
};

StageState::StageState(SnapshotStore* store, std::string stage, Snapshottable& engine, Clock& clock,
                       StateFormat format)
    : store_(store),
      stage_(std::move(stage)),
      engine_(engine),
      clock_(clock),
      format_(std::move(format)) {}

Expected<std::optional<int64_t>> StageState::restore() {
  if (store_ == nullptr) return std::optional<int64_t>{};
  Restoring restoring(*this);
  auto restored = store_->restore(stage_, restoring);
  if (!restored) return restored.take_error();
  marker_saved_ = restoring.marked();
  // Restored only when they are the stage's own.
  options_saved_ = restoring.has_options();
  return *restored;
}

Status StageState::on_control(const Line& line) {
  if (store_ == nullptr) return {};
  auto checkpoint = parse_checkpoint(line.text);
  if (!checkpoint)
    return data_error("{}: line {}: {}", line.input, line.number, checkpoint.error().message);
  if (!*checkpoint) return {};
  changes_.clear();
  engine_.take_changes(changes_);
  bool marking = !marker_saved_ && !format_.marker.empty();
  if (marking) changes_.put.emplace_back(kStateFormatKey, format_.marker);
  bool recording = !options_saved_ && !format_.options.empty();
  if (recording) changes_.put.emplace_back(kStateOptionsKey, encode_options(format_.options));
  Status saved = store_->save_snapshot(stage_, (*checkpoint)->id, changes_, clock_.now());
  // The changes can be millions of strings: free them now, not at the next
  // checkpoint.
  changes_.clear();
  if (saved.ok() && marking) marker_saved_ = true;
  if (saved.ok() && recording) options_saved_ = true;
  return saved;
}

Expected<std::string_view> encode_key(const FieldSet& fields, std::span<const size_t> slots,
                                      const JsonField* values, std::string& buffer) {
  buffer.clear();
  bool one = slots.size() == 1;
  if (!one) buffer.push_back('[');
  for (size_t i = 0; i < slots.size(); ++i) {
    const JsonField& f = values[slots[i]];
    if (f.type == JsonType::kMissing)
      return data_error("field '{}' is missing", fields.path(slots[i]).text());
    if (i > 0) buffer.push_back(',');
    // Strings without escapes (nearly all) are used as they appear.
    bool plain =
        f.type != JsonType::kString || std::memchr(f.raw.data(), '\\', f.raw.size()) == nullptr;
    if (f.type == JsonType::kObject || f.type == JsonType::kArray) {
      append_minified(buffer, f.raw);
    } else if (!plain) {
      append_json_string(buffer, f.str);
    } else if (one) {
      return f.raw;
    } else {
      buffer.append(f.raw);
    }
  }
  if (!one) buffer.push_back(']');
  return std::string_view(buffer);
}

Expected<std::optional<std::string_view>> join_key(const FieldSet& fields,
                                                   std::span<const size_t> slots,
                                                   const JsonField* values, std::string& buffer) {
  if (slots.size() != 1) {
    auto key = encode_key(fields, slots, values, buffer);
    if (!key) return key.take_error();
    return std::optional<std::string_view>(*key);
  }
  const JsonField& f = values[slots[0]];
  if (f.type == JsonType::kMissing)
    return data_error("field '{}' is missing", fields.path(slots[0]).text());
  return record_key_bytes(f, buffer);
}

}  // namespace kpipe
