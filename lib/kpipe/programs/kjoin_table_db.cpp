// kjoin's table in a database: sqlite:FILE:TABLE or postgresql://...#TABLE (kjoin(1), Tables).
#include "kpipe/programs/kjoin_internal.h"

#include "kpipe/store/sql.h"
#include "kpipe/store/table_rows.h"

namespace kpipe::kjoin_internal {

namespace {

// A database table, read again every --refresh.
class SqlTable final : public TableSource {
 public:
  SqlTable(const JoinPlan& plan, const JoinOptions& options, Io& io)
      : plan_(plan), options_(options), io_(io) {}

  Status load(JoinEngine& engine) override {
    engine.set_whole(true);
    KPIPE_TRY(read_into(engine));
    last_read_ = io_.clock.steady();
    return {};
  }

  Status poll(JoinEngine& engine, Millis) override {
    if (plan_.refresh <= 0) return {};
    Millis now = io_.clock.steady();
    if (now - last_read_ < plan_.refresh) return {};
    last_read_ = now;
    JoinEngine fresh(engine.mode(), false, 0, 0, io_.clock);
    Status read = read_into(fresh);
    if (!read.ok()) {
      io_.reporter.warning(fmt::format("kept the table read before: {}", read.error().message));
      return {};
    }
    engine.replace_table(fresh);
    return {};
  }

 private:
  // The columns --table-key and --table-time name are the table's: a
  // misspelt one is a usage error, not bad data in every row (and is one
  // in a table with no rows yet).
  Status check_columns(const std::vector<std::string>& columns) {
    std::string names;
    for (const std::string& c : columns) names += (names.empty() ? "" : ", ") + c;
    auto check = [&](std::string_view option, const std::string& column) -> Status {
      for (const std::string& c : columns)
        if (c == column) return {};
      return usage_error("{} {}: table {} has no such column (it has {})", option, column,
                         plan_.table.table, names);
    };
    for (const std::string& c : options_.table_keys) KPIPE_TRY(check("--table-key", c));
    if (!options_.table_time.empty()) KPIPE_TRY(check("--table-time", options_.table_time));
    return {};
  }

  Status read_into(JoinEngine& engine) {
    RowReader rows(plan_);
    Duplicates duplicates;
    RowBatch batch(engine, duplicates);
    begin_read();
    uint64_t n = 0;
    std::string name =
        fmt::format("table {} of {}", plan_.table.table, display_target(plan_.table.location));
    Status read = read_table_rows(
        plan_.table.location, plan_.table.table,
        [&](const std::vector<std::string>& columns) { return check_columns(columns); },
        [&](std::string_view text) -> Status {
          ++n;
          std::string_view padded = rows.pad(text);
          auto row = rows.read(padded, true);
          if (!row) return bad_row(fmt::format("{}: row {}: {}", name, n, row.error().message));
          if (!row->key)
            return bad_row(
                fmt::format("{}: row {}: column '{}' is null", name, n, options_.table_keys[0]));
          batch.add(*row->key, row->time, text, n);
          return {};
        });
    batch.flush();
    if (!read.ok()) return read;
    if (!duplicates.empty())
      return data_error("{}: {}", name, duplicates.describe(engine.mode(), "row"));
    end_read(io_.reporter);
    return {};
  }

  const JoinPlan& plan_;
  const JoinOptions& options_;
  Io& io_;
  Millis last_read_ = 0;
};

Expected<std::unique_ptr<TableSource>> open_db_table(const JoinPlan& plan,
                                                     const JoinOptions& options, Io& io) {
  return std::unique_ptr<TableSource>(std::make_unique<SqlTable>(plan, options, io));
}

}  // namespace

const TableKind kDbTable{.columns = true, .refreshed = true, .open = &open_db_table};

}  // namespace kpipe::kjoin_internal
