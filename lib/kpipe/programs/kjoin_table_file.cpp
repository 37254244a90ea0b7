// kjoin's table in a file of NDJSON rows (kjoin(1), Tables).
#include "kpipe/programs/kjoin_internal.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "kpipe/stage/line_feed.h"

namespace kpipe::kjoin_internal {

namespace {

// How often a file table is looked at for a new version.
constexpr Millis kFileCheckEvery = 1000;

// A file of NDJSON rows, read again when replaced.
class FileTable final : public TableSource {
 public:
  FileTable(const JoinPlan& plan, const JoinOptions& options, Io& io)
      : plan_(plan), path_(plan.table.location), max_line_(options.input.max_line_bytes), io_(io) {}

  Status load(JoinEngine& engine) override {
    engine.set_whole(true);
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0 && errno == ENOENT)
      return usage_error("--table: there is no file '{}'", path_);
    KPIPE_TRY(identify(identity_));
    auto read = read_into(engine);
    if (!read.ok()) return read;
    last_check_ = io_.clock.steady();
    return {};
  }

  Status poll(JoinEngine& engine, Millis) override {
    Millis now = io_.clock.steady();
    if (now - last_check_ < kFileCheckEvery) return {};
    last_check_ = now;
    Identity current;
    Status there = identify(current);
    if (!there.ok()) {
      // Gone for a moment (a rename in two steps), or for good: the table
      // read before stays, and the operator hears of it once.
      if (!warned_)
        io_.reporter.warning(fmt::format("kept the table read before: {}", there.error().message));
      warned_ = true;
      return {};
    }
    // A version refused once is not read again until it changes.
    if (current == identity_ || (refused_ && current == *refused_)) return {};
    JoinEngine fresh(engine.mode(), false, 0, 0, io_.clock);
    Status read = read_into(fresh);
    if (!read.ok()) {
      io_.reporter.warning(fmt::format("kept the table read before: {}", read.error().message));
      refused_ = current;
      return {};
    }
    identity_ = current;
    refused_.reset();
    warned_ = false;
    engine.replace_table(fresh);
    io_.reporter.info(fmt::format("read '{}' again: {} rows", path_, engine.rows()));
    return {};
  }

 private:
  struct Identity {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const Identity&) const = default;
  };

  Status identify(Identity& out) const {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0)
      return failure("cannot read the table '{}': {}", path_, std::strerror(errno));
    out = Identity{st.st_dev, st.st_ino, st.st_size,
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
    return {};
  }

  Status read_into(JoinEngine& engine) {
    LineFeed feed({path_}, max_line_, &plan_.table_fields);
    RowReader rows(plan_);
    constexpr uint64_t kSizeAfter = 4096;
    uint64_t rows_read = 0;
    Duplicates duplicates;
    RowBatch batch(engine, duplicates);
    begin_read();
    uint64_t line_bytes = 0;
    Line line;
    const ParsedLine* parsed = nullptr;
    while (true) {
      auto more = feed.next(line, parsed);
      if (!more) return more.take_error();
      if (!*more) break;
      if (is_blank_line(line.text)) continue;
      auto bad = [&](std::string_view why) {
        return bad_row(fmt::format("table {}: line {}: {}", path_, line.number, why));
      };
      if (line.too_long) {
        KPIPE_TRY(bad(fmt::format("longer than {} bytes", max_line_)));
        continue;
      }
      Status valid = rows.validate(line.text);
      if (!valid.ok()) {
        KPIPE_TRY(bad(valid.error().message));
        continue;
      }
      if (parsed != nullptr && !parsed->status.ok()) {
        KPIPE_TRY(bad(parsed->status.error().message));
        continue;
      }
      auto row =
          parsed != nullptr ? rows.from_values(parsed->values, true) : rows.read(line.text, true);
      if (!row) {
        KPIPE_TRY(bad(row.error().message));
        continue;
      }
      // A large table's index is sized once, from the first rows' length.
      line_bytes += line.text.size() + 1;
      if (++rows_read == kSizeAfter && engine.mode() == JoinMode::kLookup)
        engine.reserve(static_cast<size_t>(static_cast<double>(identity_.size) /
                                           static_cast<double>(line_bytes) * kSizeAfter * 1.05));
      if (!row->key) {
        KPIPE_TRY(bad(fmt::format("field '{}' is null",
                                  plan_.table_fields.path(plan_.table_key_slots[0]).text())));
        continue;
      }
      batch.add(*row->key, row->time, line.text, line.number);
    }
    batch.flush();
    if (!duplicates.empty())
      return data_error("table {}: {}", path_, duplicates.describe(engine.mode(), "line"));
    end_read(io_.reporter);
    return {};
  }

  const JoinPlan& plan_;
  std::string path_;
  size_t max_line_;
  Io& io_;
  Identity identity_;
  std::optional<Identity> refused_;  // a new version that was bad
  Millis last_check_ = 0;
  bool warned_ = false;
};

Expected<std::unique_ptr<TableSource>> open_file_table(const JoinPlan& plan,
                                                       const JoinOptions& options, Io& io) {
  return std::unique_ptr<TableSource>(std::make_unique<FileTable>(plan, options, io));
}

}  // namespace

const TableKind kFileTable{.open = &open_file_table};

}  // namespace kpipe::kjoin_internal
