#include "kpipe/store/upsert_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kpipe/choices.h"
#include "kpipe/control.h"

namespace kpipe {

namespace {

// What a field is, besides a column's id.
constexpr int kNotChosen = -1;  // not among --columns: left out
constexpr int kNew = -2;        // no column yet
constexpr int kRepeat = -3;  // a key repeated in its line: the first wins, as everywhere in kpipe

char fold(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// SQLite compares names ignoring ASCII case (and only ASCII case).
void fold_into(std::string_view name, std::string& out) {
  out.assign(name);
  for (char& c : out) c = fold(c);
}

// Two fields of a line that differ only in ASCII case.
Error same_column(std::string_view first, std::string_view second) {
  return data_error(
      "fields '{}' and '{}' name the same column (kupsert ignores ASCII case in names)",
      display_name(first), display_name(second));
}

Error not_a_column(std::string_view field, std::string_view table) {
  return data_error("field '{}' is not a column of table '{}' (--strict)", display_name(field),
                    display_name(table));
}

}  // namespace

// --- names -------------------------------------------------------------------

std::string quoted_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out.append(", ");
    out.append(quote_identifier(n));
  }
  return out;
}

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (fold(a[i]) != fold(b[i])) return false;
  return true;
}

std::string identifier_problem(std::string_view name, size_t max_bytes) {
  if (name.empty()) return "the name is empty";
  if (name.size() > max_bytes)
    return fmt::format("the name is longer than {} bytes ({})", max_bytes, name.size());
  if (!is_valid_utf8(name)) return "the name is not valid UTF-8";
  for (size_t i = 0; i < name.size(); ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f)
      return fmt::format("the name holds a control character (U+{:04X})", c);
    // C1 controls, U+0080 to U+009F, are C2 80 to C2 9F in UTF-8.
    if (c == 0xc2 && i + 1 < name.size()) {
      auto d = static_cast<unsigned char>(name[i + 1]);
      if (d >= 0x80 && d <= 0x9f)
        return fmt::format("the name holds a control character (U+{:04X})", d);
    }
  }
  return {};
}

std::string display_name(std::string_view name) {
  constexpr size_t kShown = 64;
  bool cut = name.size() > kShown;
  if (cut) {
    size_t n = kShown;
    // Cut at a character boundary.
    while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xc0) == 0x80) --n;
    name = name.substr(0, n);
  }
  std::string out;
  for (char ch : name) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      out.append(fmt::format("\\u{:04x}", c));
      continue;
    }
    out.push_back(ch);
  }
  if (cut) out.append("...");
  return out;
}

TableName split_table_name(std::string_view table) {
  size_t dot = table.find('.');
  if (dot == std::string_view::npos) return {{}, std::string(table)};
  return {std::string(table.substr(0, dot)), std::string(table.substr(dot + 1))};
}

Expected<std::string> column_of_option(std::string_view option, std::string_view given) {
  if (given.empty() || (given[0] != '.' && given[0] != '/')) return std::string(given);
  auto path = FieldPath::parse(given);
  if (!path) return usage_error("{} '{}': {}", option, display_name(given), path.error().message);
  const auto& steps = path->steps();
  if (steps.size() == 1 && steps[0].has_key) return steps[0].key;
  std::string field = path->last_key();
  std::string hint =
      field.empty() ? ""
                    : fmt::format(" ('{}' or '.{}')", display_name(field), display_name(field));
  return usage_error(
      "{} '{}': kupsert takes a column name, a top-level field of each line{}, not a path into a "
      "field (an envelope's value: kconsume -e --format value)",
      option, display_name(given), hint);
}

Status validate_table_spec(const TableSpec& spec, size_t max_name_bytes) {
  auto check = [&](std::string_view option, std::string_view name) -> Status {
    std::string problem = identifier_problem(name, max_name_bytes);
    if (!problem.empty()) return usage_error("{} '{}': {}", option, display_name(name), problem);
    return {};
  };
  TableName table = split_table_name(spec.table);
  if (table.name.find('.') != std::string::npos)
    return usage_error(
        "--table '{}': a table is NAME or SCHEMA.NAME, one dot between a schema and the table",
        display_name(spec.table));
  if (spec.table.find('.') == std::string::npos) {
    KPIPE_TRY(check("--table", spec.table));
  } else {
    std::string problem = identifier_problem(table.schema, max_name_bytes);
    if (!problem.empty())
      return usage_error("--table '{}': the schema: {}", display_name(spec.table), problem);
    problem = identifier_problem(table.name, max_name_bytes);
    if (!problem.empty())
      return usage_error("--table '{}': the table: {}", display_name(spec.table), problem);
  }
  if (table.name.size() >= 7 && same_name(std::string_view(table.name).substr(0, 7), "sqlite_"))
    return usage_error("--table '{}': names beginning with 'sqlite_' are reserved for SQLite",
                       spec.table);
  if (spec.key.empty()) return usage_error("--key needs at least one column");
  auto unique = [&](std::string_view option, const std::vector<std::string>& names) -> Status {
    for (size_t i = 0; i < names.size(); ++i) {
      KPIPE_TRY(check(option, names[i]));
      for (size_t j = 0; j < i; ++j)
        if (same_name(names[i], names[j]))
          return usage_error("{} names the column '{}' twice (kupsert ignores ASCII case in names)",
                             option, display_name(names[i]));
    }
    return {};
  };
  KPIPE_TRY(unique("--key", spec.key));
  KPIPE_TRY(unique("--columns", spec.columns));
  return {};
}

// --- the writer ----------------------------------------------------------------

UpsertWriter::UpsertWriter(Database& db, TableSpec spec, size_t max_name_bytes)
    : db_(db),
      spec_(std::move(spec)),
      table_name_(split_table_name(spec_.table)),
      max_name_bytes_(max_name_bytes),
      max_columns_(db.max_columns()) {
  // The key comes first in a table made here; --columns then orders the rest.
  for (const auto& k : spec_.key) key_ids_.push_back(add_column(k, true));
  for (const auto& c : spec_.columns)
    if (find_column(c) < 0) add_column(c, false);
}

UpsertWriter::~UpsertWriter() = default;

Expected<std::unique_ptr<UpsertWriter>> UpsertWriter::open(Database& db, TableSpec spec) {
  if (db.postgres()) return open_postgres_upsert_writer(db, std::move(spec));
  return open_sqlite_upsert_writer(db, std::move(spec));
}

int UpsertWriter::find_column(std::string_view name) const {
  std::string folded;
  fold_into(name, folded);
  auto it = by_name_.find(folded);
  return it == by_name_.end() ? -1 : it->second;
}

int UpsertWriter::add_column(std::string name, bool planned) {
  int id = static_cast<int>(columns_.size());
  std::string folded;
  fold_into(name, folded);
  by_name_.emplace(std::move(folded), id);
  columns_.push_back({std::move(name), planned, false});
  if (planned) ++planned_count_;
  seen_.push_back(0);
  seen_member_.push_back(0);
  held_kinds_.push_back(0);
  return id;
}

// Reads what the database holds under the table's name: nothing (the
// table is made at the first write), or a table whose columns are mapped
// and whose key must be a primary key or unique index.
Status UpsertWriter::load_table() {
  auto table = read_table();
  if (!table) return table.take_error();
  for (auto& c : columns_) c.in_table = false;
  unmapped_columns_ = 0;
  table_exists_ = table->has_value();
  if (table_exists_) {
    for (const std::string& name : **table) {
      int id = find_column(name);
      if (id < 0 && !spec_.columns.empty()) {
        ++unmapped_columns_;  // the table's, but not chosen: left alone
        continue;
      }
      if (id < 0) id = add_column(name, true);
      Column& c = columns_[static_cast<size_t>(id)];
      if (c.in_table)  // PostgreSQL's quoted names may differ in case only
        return usage_error(
            "table '{}' in '{}' has columns '{}' and '{}': kupsert ignores ASCII case in names",
            display_name(spec_.table), db_.path(), display_name(c.name), display_name(name));
      if (!c.planned) ++planned_count_;
      c.planned = c.in_table = true;
      c.name = name;  // as the table spells it
    }
    std::vector<std::string> keys;
    for (int k : key_ids_) {
      const Column& c = columns_[static_cast<size_t>(k)];
      if (!c.in_table)
        return usage_error("table '{}' in '{}' has no column '{}' (--key)",
                           display_name(spec_.table), db_.path(), display_name(c.name));
      keys.push_back(c.name);
    }
    KPIPE_TRY(check_key(keys));
  }
  ddl_needed_ = !table_exists_;
  for (const auto& c : columns_)
    if (c.planned && !c.in_table) ddl_needed_ = true;
  frozen_ = frozen_ || (spec_.strict && (table_exists_ || !spec_.columns.empty()));
  auto changed = schema_changed();  // what was just read is the last look
  if (!changed) return changed.take_error();
  return {};
}

Expected<Transaction> UpsertWriter::begin() {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.take_error();
  recheck_schema_ = true;
  return tx;
}

UpsertWriter::Kind UpsertWriter::first_kind(int column) const {
  for (const Row& row : rows_) {
    const auto& ids = column_sets_[row.column_set];
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] != column) continue;
      Kind k = values_[row.first_value + i].kind;
      if (k != Kind::kNull) return k;
      break;
    }
  }
  return Kind::kNull;
}

Status UpsertWriter::ensure_schema() {
  // Another writer of the table (an instance of the same pipeline, kpipe(7)
  // MANY INSTANCES) may be making it or its columns now: one at a time, and
  // a look at the table once it is this one's turn. The lock comes before
  // this transaction touches the table (load_table's key check plans an
  // INSERT, which locks it): a writer holding it would otherwise wait for
  // ours to make or widen the table, and ours for it.
  bool locked = false;
  if (ddl_needed_ || needs_widening()) {
    KPIPE_TRY(lock_schema());
    locked = true;
    recheck_schema_ = true;
  }
  if (recheck_schema_) {
    auto changed = schema_changed();
    if (!changed) return changed.take_error();
    if (*changed || locked) KPIPE_TRY(load_table());
    recheck_schema_ = false;
  }
  if (!ddl_needed_ && !needs_widening()) return {};
  // Needed only since the look just taken (the table was changed by
  // another): rare, and the server breaks a deadlock, failing this batch.
  if (!locked) {
    KPIPE_TRY(lock_schema());
    KPIPE_TRY(load_table());
    if (!ddl_needed_ && !needs_widening()) return {};
  }
  if (ddl_needed_) KPIPE_TRY(create_planned());
  KPIPE_TRY(widen_columns());
  auto changed = schema_changed();  // our own change is not another's
  if (!changed) return changed.take_error();
  return {};
}

Status UpsertWriter::create_planned() {
  std::vector<NewColumn> fresh;
  for (size_t id = 0; id < columns_.size(); ++id) {
    const Column& c = columns_[id];
    if (!c.planned || c.in_table) continue;
    int i = static_cast<int>(id);
    fresh.push_back({c.name, first_kind(i), held_kinds_[id], is_key(i)});
  }
  if (!table_exists_) {
    std::vector<std::string> keys;
    for (int k : key_ids_) keys.push_back(columns_[static_cast<size_t>(k)].name);
    KPIPE_TRY(create_table(fresh, keys));
    table_exists_ = true;
  } else {
    KPIPE_TRY(create_columns(fresh));
  }
  for (auto& c : columns_)
    if (c.planned) c.in_table = true;
  ddl_needed_ = false;
  return {};
}

bool UpsertWriter::is_key(int id) const {
  return std::find(key_ids_.begin(), key_ids_.end(), id) != key_ids_.end();
}

Error UpsertWriter::key_not_unique(const std::vector<std::string>& key) const {
  return usage_error(
      "table '{}' in '{}' has no primary key or unique index on ({}): --key must name one",
      display_name(spec_.table), db_.path(), fmt::join(key, ", "));
}

std::vector<std::string> UpsertWriter::names_of(const std::vector<int>& ids) const {
  std::vector<std::string> names;
  for (int id : ids) names.push_back(columns_[static_cast<size_t>(id)].name);
  return names;
}

std::string UpsertWriter::conflict_clause(const std::vector<int>& ids, bool only_changes) const {
  std::string keys = quoted_names(names_of(key_ids_));
  std::vector<std::string> updated;
  if (spec_.mode == UpsertMode::kUpsert) {
    for (int id : ids)
      if (!is_key(id)) updated.push_back(columns_[static_cast<size_t>(id)].name);
  }
  // A row of key fields only has nothing to update.
  if (updated.empty()) return fmt::format(" ON CONFLICT ({}) DO NOTHING", keys);
  // The table as the statement names it, without its schema.
  std::string table = quote_identifier(table_name_.name);
  std::string sets, mine, theirs;
  for (const std::string& name : updated) {
    std::string q = quote_identifier(name);
    if (!sets.empty()) {
      sets.append(", ");
      mine.append(", ");
      theirs.append(", ");
    }
    sets.append(fmt::format("{} = excluded.{}", q, q));
    mine.append(fmt::format("{}.{}", table, q));
    theirs.append(fmt::format("excluded.{}", q));
  }
  std::string clause = fmt::format(" ON CONFLICT ({}) DO UPDATE SET {}", keys, sets);
  if (only_changes)
    clause.append(fmt::format(" WHERE ROW({}) IS DISTINCT FROM ROW({})", mine, theirs));
  return clause;
}

Line UpsertWriter::line_of(const Row& row) const {
  Line line;
  line.text = std::string_view(raw_).substr(row.raw_offset, row.raw_size);
  line.number = row.line;
  line.input = inputs_[row.input];
  return line;
}

uint32_t UpsertWriter::column_set_for(const std::vector<int>& ids) {
  if (!column_sets_.empty() && column_sets_[last_set_] == ids) return last_set_;
  key_scratch_.assign(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int));
  auto it = column_set_index_.find(key_scratch_);
  if (it != column_set_index_.end()) return last_set_ = it->second;
  auto index = static_cast<uint32_t>(column_sets_.size());
  column_sets_.push_back(ids);
  column_set_index_.emplace(key_scratch_, index);
  return last_set_ = index;
}

uint32_t UpsertWriter::intern_input(std::string_view input) {
  std::string_view name = input.empty() ? std::string_view("<stdin>") : input;
  if (inputs_.empty() || inputs_.back() != name) inputs_.emplace_back(name);
  return static_cast<uint32_t>(inputs_.size() - 1);
}

// inline: hold_row, its one caller, runs it for every value.
inline void UpsertWriter::append_value(const JsonField& f) {
  Value& v = values_.emplace_back();
  switch (f.type) {
    case JsonType::kMissing:
    case JsonType::kNull:
      v.kind = Kind::kNull;
      return;
    case JsonType::kBool:
      v.kind = Kind::kBool;
      v.integer = f.boolean ? 1 : 0;
      return;
    case JsonType::kNumber:
      if (f.is_integer) {
        v.kind = Kind::kInteger;
        v.integer = f.integer;
        return;
      }
      append_non_integer(v, f);
      return;
    case JsonType::kString:
      v.kind = Kind::kText;
      v.offset = text_.size();
      text_.append(f.str);
      v.size = static_cast<uint32_t>(f.str.size());
      return;
    case JsonType::kObject:
    case JsonType::kArray:
      v.kind = Kind::kJson;
      v.offset = text_.size();
      append_minified(text_, f.raw);
      v.size = static_cast<uint32_t>(text_.size() - v.offset);
      return;
  }
}

// Out of append_value, so that the common kinds stay inline in hold_row.
void UpsertWriter::append_non_integer(Value& v, const JsonField& f) {
  if (f.raw.find_first_of(".eE") != std::string_view::npos) {
    v.kind = Kind::kReal;
    v.real = f.number;
    return;
  }
  // An integer beyond 64 bits: its digits, so that a backend that can keep
  // them (PostgreSQL's numeric) does.
  v.kind = Kind::kBigInteger;
  v.offset = text_.size();
  text_.append(f.raw);
  v.size = static_cast<uint32_t>(f.raw.size());
}

Status UpsertWriter::add(const Line& line) {
  // A value's size is held in 32 bits (SQLite's own limit is 1e9 bytes).
  if (line.text.size() > UINT32_MAX) return data_error("the line is longer than 4 GiB");
  KPIPE_TRY(reader_.read_members(line.text, members_));
  ++serial_;
  // Nothing changes until the line is known to be a row, so that a
  // refused line leaves no trace.
  size_t fresh = 0;  // fields that are no column yet
  KPIPE_TRY(map_members(fresh));
  KPIPE_TRY(check_row(fresh));
  plan_columns();
  hold_row(line);
  remember_names();
  return {};
}

int UpsertWriter::column_of(size_t member) const {
  std::string_view key = members_[member].key;
  if (member < last_keys_.size() && last_ids_[member] != kNew && last_keys_[member] == key)
    return last_ids_[member];
  int id = find_column(key);
  if (id < 0) id = spec_.columns.empty() ? kNew : kNotChosen;
  return id;
}

Status UpsertWriter::map_members(size_t& fresh) {
  const size_t n = members_.size();
  member_ids_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    int id = column_of(i);
    member_ids_[i] = id;
    if (id == kNotChosen) continue;
    const JsonField& value = members_[i].value;
    // Valid JSON, but a REAL (double precision) would hold it as an
    // infinity, one for 1e309 and 1e400 alike: the value would be lost.
    if (value.type == JsonType::kNumber && !value.is_integer && !std::isfinite(value.number))
      return data_error("field '{}' is {}, outside the range of a double",
                        display_name(members_[i].key), display_name(value.raw));
    if (id == kNew) {
      KPIPE_TRY(map_new_field(i));
      if (member_ids_[i] == kNew) ++fresh;
      continue;
    }
    KPIPE_TRY(map_known_field(i, id));
  }
  return {};
}

Status UpsertWriter::map_new_field(size_t member) {
  std::string_view key = members_[member].key;
  if (frozen_) return not_a_column(key, spec_.table);
  std::string problem = identifier_problem(key, max_name_bytes_);
  if (!problem.empty())
    return data_error("field '{}' cannot be a column: {}", display_name(key), problem);
  for (size_t j = 0; j < member; ++j) {
    if (member_ids_[j] != kNew || !same_name(members_[j].key, key)) continue;
    if (members_[j].key == key) {
      member_ids_[member] = kRepeat;
      break;
    }
    return same_column(members_[j].key, key);
  }
  return {};
}

Status UpsertWriter::map_known_field(size_t member, int id) {
  std::string_view key = members_[member].key;
  auto column = static_cast<size_t>(id);
  if (!columns_[column].planned && frozen_) return not_a_column(key, spec_.table);
  if (seen_[column] == serial_) {
    std::string_view first = members_[seen_member_[column]].key;
    if (first != key) return same_column(first, key);
    member_ids_[member] = kRepeat;
    return {};
  }
  seen_[column] = serial_;
  seen_member_[column] = static_cast<uint32_t>(member);
  return {};
}

Status UpsertWriter::check_row(size_t fresh) const {
  for (int k : key_ids_) {
    const auto& name = columns_[static_cast<size_t>(k)].name;
    if (seen_[static_cast<size_t>(k)] != serial_)
      return data_error("key field '{}' is missing", display_name(name));
    JsonType t = members_[seen_member_[static_cast<size_t>(k)]].value.type;
    if (t == JsonType::kNull) return data_error("key field '{}' is null", display_name(name));
  }
  size_t unplanned = 0;
  for (int id : member_ids_)
    if (id >= 0 && !columns_[static_cast<size_t>(id)].planned) ++unplanned;
  size_t columns = unmapped_columns_ + planned_count_ + fresh + unplanned;
  if (fresh + unplanned > 0 && columns > static_cast<size_t>(max_columns_))
    return data_error(
        "the row would give table '{}' more than {} columns, the database's limit (choose fields "
        "with --columns)",
        display_name(spec_.table), max_columns_);
  return {};
}

void UpsertWriter::plan_columns() {
  for (size_t i = 0; i < members_.size(); ++i) {
    int id = member_ids_[i];
    if (id == kNew) {
      id = add_column(std::string(members_[i].key), true);
      member_ids_[i] = id;
      seen_[static_cast<size_t>(id)] = serial_;
      seen_member_[static_cast<size_t>(id)] = static_cast<uint32_t>(i);
      ddl_needed_ = true;
      continue;
    }
    if (id >= 0 && !columns_[static_cast<size_t>(id)].planned) {
      columns_[static_cast<size_t>(id)].planned = true;
      ++planned_count_;
      ddl_needed_ = true;
    }
  }
  if (spec_.strict) frozen_ = true;  // the first row settles a table made without --columns
}

void UpsertWriter::hold_row(const Line& line) {
  Row row;
  row.first_value = values_.size();
  row_ids_.clear();
  for (size_t i = 0; i < members_.size(); ++i) {
    int id = member_ids_[i];
    if (id < 0) continue;
    row_ids_.push_back(id);
    append_value(members_[i].value);
    held_kinds_[static_cast<size_t>(id)] |= bit(values_.back().kind);
  }
  row.column_set = column_set_for(row_ids_);
  row.raw_offset = raw_.size();
  row.raw_size = line.text.size();
  raw_.append(line.text);
  row.line = line.number;
  row.input = intern_input(line.input);
  rows_.push_back(row);
}

void UpsertWriter::remember_names() {
  const size_t n = members_.size();
  if (last_keys_.size() < n) {
    last_keys_.resize(n);
    last_ids_.resize(n, kNew);
  }
  for (size_t i = 0; i < n; ++i) {
    if (last_keys_[i] != members_[i].key) last_keys_[i].assign(members_[i].key);
    // A repeat is one only within its line: the name is looked up again.
    last_ids_[i] = member_ids_[i] == kRepeat ? kNew : member_ids_[i];
  }
}

void UpsertWriter::discard_pending() {
  std::fill(held_kinds_.begin(), held_kinds_.end(), Kinds{0});
  rows_.clear();
  values_.clear();
  text_.clear();
  raw_.clear();
  inputs_.clear();
}

Status UpsertWriter::write_pending(const RefusedRow& refused) {
  if (rows_.empty()) return {};
  Status result = [&]() -> Status {
    KPIPE_TRY(ensure_schema());
    // A refused line goes to the dead-letter store, which reads it as it
    // reads any line: padded.
    raw_.append(kJsonPadding, '\0');
    return write_rows(refused);
  }();
  discard_pending();
  return result;
}

}  // namespace kpipe
